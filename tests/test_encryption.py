"""Encryption at rest: sealed content and native data, keys per owner, rotation and crypto-shredding."""

from __future__ import annotations

import asyncio

import pytest

from chronica_core import (
    ActaQuery,
    ActorKind,
    Actum,
    ActumKind,
    ActumTooLarge,
    AsyncChronicarius,
    AsyncMemoryStore,
    BackendUnavailable,
    Chronicarius,
    InvalidOption,
    MemoryStore,
    Native,
    StoreError,
    open_async_store,
    open_store,
)
from chronica_core.capabilities import store_capabilities
from chronica_core.encrypted import encrypted_store
from chronica_core.encryption import SEALED_PREFIX, DerivedKeys, MemoryKeys


def message(chronicum_id: str, content: str, **fields: object) -> Actum:
    return Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", content, **fields)  # type: ignore[arg-type]


def stored(inner: MemoryStore, chronicum_id: str) -> list[Actum]:
    return inner.acta(chronicum_id, ActaQuery())


def test_content_and_native_data_are_sealed_at_rest_and_read_back_as_written() -> None:
    inner = MemoryStore()
    chronicarius = Chronicarius(encrypted_store(inner, MemoryKeys()))
    native = Native("openai-agents.item", '{"role": "user", "content": "a quiet table"}')
    written = chronicarius.record_actum("ardian", message("dinner", "a quiet table for four", native=native))
    assert (written.content, written.native) == ("a quiet table for four", native)
    [raw] = stored(inner, "dinner")
    assert raw.content.startswith(SEALED_PREFIX) and "quiet" not in raw.content
    assert raw.native is not None and raw.native.format == native.format
    assert raw.native.data.startswith(SEALED_PREFIX) and "quiet" not in raw.native.data
    assert (raw.id, raw.kind, raw.actor_kind, raw.actor) == (
        written.id,
        written.kind,
        written.actor_kind,
        "ardian",
    )
    assert chronicarius.get_acta("ardian", "dinner") == [written]


def test_each_owner_has_keys_of_their_own() -> None:
    keys = MemoryKeys()
    inner = MemoryStore()
    chronicarius = Chronicarius(encrypted_store(inner, keys))
    chronicarius.record_actum("ardian", message("a", "same words"))
    chronicarius.record_actum("rafa", Actum("r", ActumKind.MESSAGE, ActorKind.HUMAN, "rafa", "same words"))
    assert keys.current("ardian")[1] != keys.current("rafa")[1]
    assert stored(inner, "a")[0].content != stored(inner, "r")[0].content


def test_a_sealed_text_moved_to_another_actum_does_not_open() -> None:
    inner = MemoryStore()
    encrypted = encrypted_store(inner, MemoryKeys())
    chronicarius = Chronicarius(encrypted)
    first = chronicarius.record_actum("ardian", message("dinner", "first"))
    second = chronicarius.record_actum("ardian", message("dinner", "second"))
    sealed_first = stored(inner, "dinner")[0].content
    moved = Actum("dinner", ActumKind.MESSAGE, ActorKind.HUMAN, "ardian", sealed_first, id="f" * 32)
    inner.record(moved)  # a row copied by someone with access to the database
    with pytest.raises(StoreError, match="does not open"):
        chronicarius.get_acta("ardian", "dinner")
    assert [first.content, second.content] == ["first", "second"]


def test_rotation_keeps_earlier_acta_readable() -> None:
    keys = MemoryKeys()
    inner = MemoryStore()
    chronicarius = Chronicarius(encrypted_store(inner, keys))
    chronicarius.record_actum("ardian", message("dinner", "before rotation"))
    first_key = keys.current("ardian")[0]
    second_key = keys.rotate("ardian")
    chronicarius.record_actum("ardian", message("dinner", "after rotation"))
    key_ids = [actum.content.split(":")[3] for actum in stored(inner, "dinner")]
    assert key_ids == [first_key, second_key] and first_key != second_key
    assert [actum.content for actum in chronicarius.get_acta("ardian", "dinner")] == [
        "before rotation",
        "after rotation",
    ]


def test_derived_keys_rotate_by_master_key_and_cannot_be_destroyed() -> None:
    old = DerivedKeys({"2026a": b"a" * 32}, current="2026a")
    new = DerivedKeys({"2026a": b"a" * 32, "2026b": b"b" * 32}, current="2026b")
    assert old.current("ardian")[1] == new.key("ardian", "2026a")
    assert new.current("ardian")[0] == "2026b"
    assert old.current("ardian")[1] != old.current("rafa")[1]
    assert old.key("ardian", "elsewhere") is None
    assert old.destroy("ardian") is False
    with pytest.raises(InvalidOption, match="at least 32 bytes"):
        DerivedKeys({"short": b"x"}, current="short")
    with pytest.raises(InvalidOption, match="not among"):
        DerivedKeys({"a": b"a" * 32}, current="b")
    with pytest.raises(InvalidOption, match="key_id"):
        DerivedKeys({"no spaces": b"a" * 32}, current="no spaces")


@pytest.mark.parametrize("master", ["k" * 44, bytearray(32), None])
def test_a_master_key_that_is_not_bytes_is_refused_by_its_type(master: object) -> None:
    """A base64 text from a secret manager is 44 characters: "at least 32 bytes" would mislead."""
    with pytest.raises(InvalidOption) as refused:
        DerivedKeys({"2026a": master}, current="2026a")  # type: ignore[dict-item]
    assert refused.value.option == "master_keys"
    assert f"key '2026a' must be bytes, not {type(master).__name__}" in str(refused.value)


def test_erasing_an_owner_destroys_their_keys_and_what_a_backup_kept_no_longer_opens() -> None:
    keys = MemoryKeys()
    inner = MemoryStore()
    encrypted = encrypted_store(inner, keys)
    chronicarius = Chronicarius(encrypted)
    chronicarius.record_actum("ardian", message("dinner", "my address is ..."))
    backup = stored(inner, "dinner")[0]  # what a backup taken before the erasure holds
    chronicarius.record_actum("rafa", Actum("r", ActumKind.MESSAGE, ActorKind.HUMAN, "rafa", "kept"))
    assert chronicarius.erase_owner("ardian") == 1
    assert keys.key("ardian", backup.content.split(":")[3]) is None
    restored = MemoryStore()  # the backup restored somewhere
    restored_chronicarius = Chronicarius(encrypted_store(restored, keys))
    restored_chronicarius.record_actum("ardian", message("dinner", "x"))
    restored.record(backup)
    with pytest.raises(StoreError, match="no key"):
        restored_chronicarius.get_acta("ardian", "dinner")
    assert [actum.content for actum in chronicarius.get_acta("rafa", "r")] == ["kept"]  # others untouched


class CountingKeys(MemoryKeys):
    """Memory keys that count the keys asked for to open a text."""

    def __init__(self) -> None:
        super().__init__()
        self.opened = 0

    def key(self, owner_id: str, key_id: str) -> bytes | None:
        self.opened += 1
        return super().key(owner_id, key_id)


def test_a_write_answers_its_own_texts_without_opening_them_and_a_replay_opens_the_first() -> None:
    keys = CountingKeys()
    chronicarius = Chronicarius(encrypted_store(MemoryStore(), keys))
    native = Native("f", '{"n": 1}')
    first = chronicarius.record_actum(
        "ardian", message("dinner", "first", native=native), idempotency_key="k"
    )
    [batch_one, batch_two] = chronicarius.record_acta(
        "ardian", [message("dinner", "b1"), message("dinner", "b2")]
    )
    assert (first.content, first.native, batch_one.content, batch_two.content) == (
        "first",
        native,
        "b1",
        "b2",
    )
    assert keys.opened == 0
    replay = chronicarius.record_actum("ardian", message("dinner", "second"), idempotency_key="k")
    assert (replay.id, replay.content, replay.native) == (first.id, "first", native)  # opened: 2 texts
    assert keys.opened == 2
    assert [actum.content for actum in chronicarius.get_acta("ardian", "dinner")] == ["first", "b1", "b2"]


def test_keys_rotated_and_destroyed_behind_the_store_s_back_are_seen_at_once() -> None:
    keys = MemoryKeys()
    chronicarius = Chronicarius(encrypted_store(MemoryStore(), keys))
    chronicarius.record_actum("ardian", message("dinner", "before"))
    keys.rotate("ardian")
    chronicarius.record_actum("ardian", message("dinner", "after"))
    assert [actum.content for actum in chronicarius.get_acta("ardian", "dinner")] == ["before", "after"]
    keys.destroy("ardian")  # by the provider alone: the store's ciphers of those keys open nothing more
    with pytest.raises(StoreError, match="no key"):
        chronicarius.get_acta("ardian", "dinner")


def test_acta_written_before_encryption_read_back_as_they_are() -> None:
    inner = MemoryStore()
    Chronicarius(inner).record_actum("ardian", message("dinner", "written in clear"))
    chronicarius = Chronicarius(encrypted_store(inner, MemoryKeys()))
    chronicarius.record_actum("ardian", message("dinner", "written sealed"))
    assert [actum.content for actum in chronicarius.get_acta("ardian", "dinner")] == [
        "written in clear",
        "written sealed",
    ]


def test_the_limit_is_the_wrapped_store_s_less_what_sealing_adds() -> None:
    encrypted = encrypted_store(MemoryStore(max_content_bytes=4096), MemoryKeys())
    limit = encrypted.max_content_bytes()
    assert limit is not None and 0 < limit < 4096
    chronicarius = Chronicarius(encrypted)
    native = Native("f", "n" * (limit // 2))
    chronicarius.record_actum("ardian", message("dinner", "c" * (limit - limit // 2), native=native))
    with pytest.raises(ActumTooLarge) as refused:
        chronicarius.record_actum("ardian", message("dinner", "c" * (limit - limit // 2 + 1), native=native))
    assert (refused.value.size, refused.value.limit) == (limit + 1, limit)
    assert encrypted_store(MemoryStore(), MemoryKeys()).max_content_bytes() is None


def test_the_face_has_the_wrapped_store_s_capabilities_and_no_more() -> None:
    from chronica_notebook.plugin import NotebookStore  # a store of the base contract alone

    assert store_capabilities(encrypted_store(MemoryStore(), MemoryKeys())) == store_capabilities(
        MemoryStore()
    )
    plain = NotebookStore()
    assert store_capabilities(encrypted_store(plain, MemoryKeys())) == store_capabilities(plain)


def test_open_store_encrypts_with_encryption_keys_and_refuses_what_is_not_a_key_provider() -> None:
    keys = MemoryKeys()
    with open_store("memory://", encryption_keys=keys) as store:
        Chronicarius(store).record_actum("ardian", message("dinner", "sealed"))
        assert store.inner.acta("dinner", ActaQuery())[0].content.startswith(SEALED_PREFIX)  # type: ignore[attr-defined]
    with pytest.raises(InvalidOption, match="KeyProvider"):
        open_store("memory://", encryption_keys="not a provider")


def test_asyncio_stores_are_sealed_alike() -> None:
    async def scenario() -> tuple[str, str]:
        inner = AsyncMemoryStore()
        chronicarius = AsyncChronicarius(encrypted_store(inner, MemoryKeys()))
        await chronicarius.record_actum("ardian", message("dinner", "sealed on a loop"))
        raw = (await inner.acta("dinner", ActaQuery()))[0].content
        [read] = await chronicarius.get_acta("ardian", "dinner")
        async_store = open_async_store("memory://", encryption_keys=MemoryKeys())
        await async_store.close()
        return raw, read.content

    raw, read = asyncio.run(scenario())
    assert raw.startswith(SEALED_PREFIX) and read == "sealed on a loop"


def test_without_cryptography_the_option_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "chronica_core.encrypted", None)
    with pytest.raises(BackendUnavailable, match=r"needs the cryptography package: pip install "):
        open_store("memory://", encryption_keys=MemoryKeys())
