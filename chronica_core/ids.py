"""Fresh ids: 128 random bits from the operating system, as 32 lowercase hex characters."""

from __future__ import annotations

import os

__all__ = ["new_actum_id", "new_chronicum_id"]


def new_actum_id() -> str:
    """Return a fresh actum id: 32 lowercase hex characters (128 bits from ``os.urandom``).

    ``os.urandom`` directly, as ``secrets.token_hex`` does through three calls: every write
    takes one. The only error is the operating system's, when its random source fails; it is not
    caught.
    """
    return os.urandom(16).hex()


def new_chronicum_id() -> str:
    """Return a fresh, unguessable chronicum id: 32 lowercase hex characters, like an actum id.

    Use it when an app starts a new conversation. A chronicum id is all a writer needs to try to
    write into a chronicum: a write into an id nobody holds creates the chronicum, and a write into
    an id another owner holds fails with ``ChronicumNotFound`` and tells the writer that the id is
    taken. Guessable ids (``main``, a user name) therefore collide between owners and let them
    probe for each other's chronica; 128 random bits do neither.

    The only error is the operating system's, when its random source fails; it is not caught.
    """
    return new_actum_id()
