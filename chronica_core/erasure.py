"""What an erased chronicum leaves behind: a marker holding its id and a digest of its owner.

Ownership never changes (owner caches in other processes rely on it), so an erased chronicum's
id must never pass to another owner. The marker a store keeps for that holds no personal data
beyond :func:`owner_digest`; the same owner writing to the id again starts a fresh chronicum
(``Chronicarius`` compares digests and asks the store to ``reopen`` it).
"""

from __future__ import annotations

import hashlib

__all__ = ["owner_digest"]


def owner_digest(owner_id: str) -> str:
    """Return ``"sha256:"`` followed by the 64 lowercase hex digits of SHA-256 over ``owner_id`` in UTF-8.

    The marker of an erased chronicum keeps this instead of the owner id. Raises nothing for a
    valid owner id (``Chronicarius`` has checked it).
    """
    return "sha256:" + hashlib.sha256(owner_id.encode()).hexdigest()
