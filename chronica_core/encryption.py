"""Encryption at rest for any store: the content of every actum sealed with a key of its owner's.

:func:`encrypted_store` (or ``open_store(url, encryption_keys=...)``) wraps any store, blocking or
asyncio, ours or a third party's. Each actum's ``content`` and its native form's ``data`` are
sealed with AES-256-GCM (``cryptography``'s AEAD) under a key of the chronicum's owner, which a
:class:`KeyProvider` supplies, before they reach the store; every read opens them again. Ids,
kinds, actor kinds, actors, times and positions stay clear, so context windows remain one store
read. Acta stored before encryption was turned on read back as they are.

Keys:

- Every owner has keys of their own, named by a key id stored with each sealed text; new writes
  use the owner's current key and older texts keep their key id, so rotating keys (a new current
  key) leaves every earlier actum readable.
- Erasing an owner (``erase_owner``) also destroys their keys where the provider can
  (:meth:`KeyProvider.destroy`): backups and replicas then hold only texts nobody can open
  (crypto-shredding), and the encrypted store forgets the ciphers it built from them (it asks the
  provider for the key on every call all the same). :class:`DerivedKeys` cannot (its keys are
  derived again from the app's master key); :class:`MemoryKeys` can, and so can a provider of your
  own in front of a KMS.

A sealed text is ``chronica:sealed:1:<key id>:<base64url of nonce, ciphertext and tag>``; the
actum's id and which field it is are its associated data, so a sealed text moved to another
actum or field does not open.
"""

from __future__ import annotations

import binascii
import os
import threading
from collections.abc import Mapping
from typing import Final, Protocol, TypeVar, runtime_checkable

from chronica_core.errors import InvalidOption, StoreError

try:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF
except ModuleNotFoundError as missing:  # an optional extra
    raise ModuleNotFoundError(
        "chronica_core.encryption needs the cryptography package: pip install 'chronica[encryption]'",
        name=missing.name,
    ) from missing

__all__ = [
    "KEY_BYTES",
    "SEALED_PREFIX",
    "DerivedKeys",
    "KeyProvider",
    "MemoryKeys",
    "Sealer",
    "sealed_size",
]

KEY_BYTES: Final = 32
"""The length of every key, in bytes (AES-256)."""

SEALED_PREFIX: Final = "chronica:sealed:1:"
"""How every sealed text starts (then the key id, a colon and the base64url body)."""

_NONCE_BYTES: Final = 12
_TAG_BYTES: Final = 16
_REMEMBERED: Final = 1024
"""The most keys (derived) or ciphers (of a sealer) kept in memory; the oldest go first."""

_K = TypeVar("_K")
_V = TypeVar("_V")


@runtime_checkable
class KeyProvider(Protocol):
    """Where an encrypted store gets its owners' keys (a KMS, a key table, or derived keys).

    Every method is called with a valid owner id and may be called from several threads at once.
    """

    def current(self, owner_id: str) -> tuple[str, bytes]:
        """Return ``(key id, key)`` for new writes of ``owner_id``, making the owner's first key if needed.

        The key id is 1 to 64 characters of ``[A-Za-z0-9._-]``; the key is :data:`KEY_BYTES` bytes.
        """
        ...

    def key(self, owner_id: str, key_id: str) -> bytes | None:
        """Return the key ``key_id`` of ``owner_id``, or ``None`` when it is unknown or destroyed."""
        ...

    def destroy(self, owner_id: str) -> bool:
        """Forget every key of ``owner_id`` for good; return whether the provider could.

        Called after the owner's chronica are erased (crypto-shredding). ``False``: this provider
        cannot destroy keys (the erasure itself still happened).
        """
        ...


def _checked_key_id(key_id: str) -> str:
    if not (0 < len(key_id) <= 64 and all(c.isascii() and (c.isalnum() or c in "._-") for c in key_id)):
        raise InvalidOption("encryption", "key_id", f"1 to 64 characters of [A-Za-z0-9._-], not {key_id!r}")
    return key_id


class DerivedKeys:
    """Keys derived from the app's master keys: one per owner and master key, with HKDF-SHA256.

    Nothing is stored: the same master key and owner always give the same key (each derived once,
    then kept in this process's memory, the 1,024 newest). Rotate by adding
    a new master key and making it ``current``; keep the old ones so earlier acta stay readable.
    :meth:`destroy` cannot work (the keys can be derived again): use a provider that stores
    random keys for crypto-shredding.

    Args:
        master_keys: key id -> master key of at least 32 bytes (e.g. from a secret manager).
        current: the id of the master key new writes use.

    Raises:
        InvalidOption: a key id that is not 1 to 64 characters of ``[A-Za-z0-9._-]``, a master
            key that is not ``bytes`` or is shorter than 32 bytes, or a ``current`` not among
            ``master_keys``.
    """

    def __init__(self, master_keys: Mapping[str, bytes], current: str) -> None:
        for key_id, master in master_keys.items():
            _checked_key_id(key_id)
            if not isinstance(master, bytes):
                raise InvalidOption(
                    "encryption",
                    "master_keys",
                    f"key {key_id!r} must be bytes, not {type(master).__name__} (decode a text key first)",
                )
            if len(master) < KEY_BYTES:
                raise InvalidOption("encryption", "master_keys", f"key {key_id!r} must be at least 32 bytes")
        if current not in master_keys:
            raise InvalidOption("encryption", "current", f"{current!r} is not among the master keys")
        self._masters = dict(master_keys)
        self._current = current
        self._derived: dict[tuple[str, str], bytes] = {}  # (key id, owner id) -> key, bounded
        self._lock = threading.Lock()

    def current(self, owner_id: str) -> tuple[str, bytes]:
        """See :meth:`KeyProvider.current`."""
        return self._current, self._derive(self._current, owner_id)

    def key(self, owner_id: str, key_id: str) -> bytes | None:
        """See :meth:`KeyProvider.key`."""
        return self._derive(key_id, owner_id) if key_id in self._masters else None

    def destroy(self, owner_id: str) -> bool:
        """Return ``False``: derived keys cannot be destroyed (see the class)."""
        return False

    def _derive(self, key_id: str, owner_id: str) -> bytes:
        """The key of ``owner_id`` under master key ``key_id``: derived once, then remembered."""
        key = self._derived.get((key_id, owner_id))
        if key is None:
            info = b"chronica owner key\x00" + owner_id.encode()
            key = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(
                self._masters[key_id]
            )
            with self._lock:
                _bounded_put(self._derived, (key_id, owner_id), key)
        return key


class MemoryKeys:
    """Random keys per owner, kept in this process's memory: tests, and the model of a KMS provider.

    :meth:`rotate` gives an owner a new current key; :meth:`destroy` forgets all of an owner's.
    Gone when the process ends, so only for tests and development.
    """

    def __init__(self) -> None:
        self._keys: dict[str, dict[str, bytes]] = {}
        self._current: dict[str, str] = {}
        self._lock = threading.Lock()

    def current(self, owner_id: str) -> tuple[str, bytes]:
        """See :meth:`KeyProvider.current`."""
        with self._lock:
            if owner_id not in self._current:
                self._add(owner_id)
            key_id = self._current[owner_id]
            return key_id, self._keys[owner_id][key_id]

    def key(self, owner_id: str, key_id: str) -> bytes | None:
        """See :meth:`KeyProvider.key`."""
        return self._keys.get(owner_id, {}).get(key_id)

    def rotate(self, owner_id: str) -> str:
        """Give ``owner_id`` a new current key; return its id. Earlier keys stay readable."""
        with self._lock:
            return self._add(owner_id)

    def destroy(self, owner_id: str) -> bool:
        """Forget every key of ``owner_id``; return ``True``."""
        with self._lock:
            self._keys.pop(owner_id, None)
            self._current.pop(owner_id, None)
        return True

    def _add(self, owner_id: str) -> str:
        keys = self._keys.setdefault(owner_id, {})
        key_id = os.urandom(8).hex()  # never the id of a destroyed key
        keys[key_id] = os.urandom(KEY_BYTES)
        self._current[owner_id] = key_id
        return key_id


def sealed_size(size: int, key_id_length: int = 64) -> int:
    """The most characters a text of ``size`` bytes of UTF-8 takes once sealed (with a key id that long)."""
    body = size + _NONCE_BYTES + _TAG_BYTES
    return len(SEALED_PREFIX) + key_id_length + 1 + 4 * ((body + 2) // 3)


class Sealer:
    """Seals and opens texts with a :class:`KeyProvider`'s keys; thread-safe.

    Args:
        keys: the key provider.
        where: how errors name the store, e.g. ``"encrypted postgres"``.
    """

    def __init__(self, keys: KeyProvider, where: str) -> None:
        if not isinstance(keys, KeyProvider):
            raise InvalidOption("encryption", "encryption_keys", "must be a KeyProvider")
        self.keys = keys
        self._where = where
        # (owner id, key id) -> (key, its AESGCM), bounded: the provider is still asked for the
        # key on every call, and decides; only the cipher built from the key it answers is kept.
        self._ciphers: dict[tuple[str, str], tuple[bytes, AESGCM]] = {}
        self._lock = threading.Lock()

    def forget(self, owner_id: str) -> None:
        """Drop what this sealer keeps of ``owner_id``'s keys (after the provider destroyed them)."""
        with self._lock:
            for known in [known for known in self._ciphers if known[0] == owner_id]:
                del self._ciphers[known]

    def seal(self, owner_id: str, text: str, aad: str) -> str:
        """Return ``text`` sealed with ``owner_id``'s current key, bound to ``aad``."""
        key_id, key = self.keys.current(owner_id)
        nonce = os.urandom(_NONCE_BYTES)
        body = nonce + self._cipher(owner_id, key_id, key).encrypt(nonce, text.encode(), aad.encode())
        return f"{SEALED_PREFIX}{_checked_key_id(key_id)}:{_base64url(body)}"

    def open(self, owner_id: str, text: str, aad: str) -> str:
        """Return the text ``text`` seals; a text that is not sealed is returned as it is.

        Raises:
            StoreError: the key it names is unknown or destroyed, or the text does not open
                (altered, or moved from another actum or field).
        """
        if not text.startswith(SEALED_PREFIX):
            return text
        key_id, _, body = text[len(SEALED_PREFIX) :].partition(":")
        key = self.keys.key(owner_id, key_id)
        if key is None:
            raise StoreError(f"{self._where}: open", f"no key {key_id!r} for the chronicum's owner")
        try:
            raw = _from_base64url(body)
            cipher = self._cipher(owner_id, key_id, key)
            return cipher.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], aad.encode()).decode()
        except (InvalidTag, ValueError) as error:
            raise StoreError(f"{self._where}: open", "a sealed text does not open with its key") from error

    def _cipher(self, owner_id: str, key_id: str, key: bytes) -> AESGCM:
        """The AES-GCM cipher of ``key`` (the provider's answer for ``owner_id``'s ``key_id``).

        Raises ``ValueError`` for a key of the wrong length.
        """
        known = self._ciphers.get((owner_id, key_id))
        if known is not None and known[0] == key:
            return known[1]
        cipher = AESGCM(key)
        with self._lock:
            _bounded_put(self._ciphers, (owner_id, key_id), (key, cipher))
        return cipher


def _base64url(raw: bytes) -> str:
    """``base64.urlsafe_b64encode(raw).decode()``: ``bytes.replace`` costs less than its ``translate``."""
    return binascii.b2a_base64(raw, newline=False).replace(b"+", b"-").replace(b"/", b"_").decode()


def _from_base64url(body: str) -> bytes:
    """``base64.urlsafe_b64decode(body)`` (``ValueError`` for what it refuses), as :func:`_base64url`."""
    return binascii.a2b_base64(body.encode("ascii").replace(b"-", b"+").replace(b"_", b"/"))


def _bounded_put(cache: dict[_K, _V], name: _K, value: _V) -> None:
    """Put ``value`` in ``cache`` under ``name``, dropping the oldest entries beyond :data:`_REMEMBERED`.

    Call it holding the cache's lock.
    """
    cache[name] = value
    while len(cache) > _REMEMBERED:
        del cache[next(iter(cache))]
