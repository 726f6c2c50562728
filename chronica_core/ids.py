"""Actum ids: 128 random bits from the operating system, as 32 lowercase hex characters."""

from __future__ import annotations

import secrets

__all__ = ["new_actum_id"]


def new_actum_id() -> str:
    """Return a fresh actum id: 32 lowercase hex characters (128 bits from ``os.urandom``).

    The only error is the operating system's, when its random source fails; it is not caught.
    """
    return secrets.token_hex(16)
