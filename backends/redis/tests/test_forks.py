"""Forks on Redis: where their keys live, and how many round trips reading them takes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from chronica_redis import RedisStore
from chronica_redis.keys import chronicum_keys, fork_keys
from conftest import store_options
from redis.crc import key_slot

from chronica_core import ActorKind, Actum, ActumKind, Chronicarius

OWNER = "ardian"


def _say(chronicarius: Chronicarius, chronicum_id: str, count: int) -> list[Actum]:
    return [
        chronicarius.record_actum(
            OWNER, Actum(chronicum_id, ActumKind.MESSAGE, ActorKind.HUMAN, OWNER, f"{chronicum_id} {index}")
        )
        for index in range(count)
    ]


@contextmanager
def _counted(store: RedisStore) -> Iterator[list[Any]]:
    """The operations the store sends to Redis meanwhile (each one round trip)."""
    sent: list[Any] = []
    perform = store._client.perform

    def counting(operation: Any) -> Any:
        sent.append(operation)
        return perform(operation)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store._client, "perform", counting)
        yield sent


def test_a_family_lives_in_its_root_s_slot(store: RedisStore) -> None:
    """A fork's keys, and a fork of a fork's, hash to the root's slot; their homes only point there."""
    chronicarius = Chronicarius(store)
    _say(chronicarius, "root {a}", 2)
    fork = chronicarius.fork_chronicum(OWNER, "root {a}", fork_id="fork:1")
    deeper = chronicarius.fork_chronicum(OWNER, fork.id, fork_id="fork:1:c")
    _say(chronicarius, deeper.id, 1)
    prefix = store.plans.prefix
    root_slot = key_slot(chronicum_keys(prefix, "root {a}").meta.encode())
    for fork_id in (fork.id, deeper.id):
        keys = fork_keys(prefix, "root {a}", fork_id)
        assert {key_slot(key.encode()) for key in keys.every_key()} == {root_slot}
        assert store.client.hgetall(chronicum_keys(prefix, fork_id).meta) == {"root": "root {a}"}
    assert (
        len(
            {
                *fork_keys(prefix, "root {a}", fork.id).every_key(),
                *fork_keys(prefix, "root {a}", deeper.id).every_key(),
            }
        )
        == 38
    )
    assert [actum.content for actum in chronicarius.get_acta(OWNER, deeper.id)] == [
        "root {a} 0",
        "root {a} 1",
        "fork:1:c 0",
    ]


def test_a_window_over_a_fork_is_one_round_trip(store: RedisStore, redis_url: str, prefix: str) -> None:
    """Once the layout is known, a fork's window is one script; a store new to the fork asks its home once."""
    chronicarius = Chronicarius(store)
    _say(chronicarius, "source", 30)
    fork = chronicarius.fork_chronicum(OWNER, "source")
    _say(chronicarius, fork.id, 3)
    chronicarius.get_acta(OWNER, fork.id, last_n=20)
    with _counted(store) as sent:
        window = chronicarius.get_acta(OWNER, fork.id, last_n=20)
    assert len(sent) == 1 and [actum.content for actum in window][-4:] == [
        "source 29",
        *(f"{fork.id} {i}" for i in range(3)),
    ]
    with RedisStore(redis_url, prefix=prefix, **store_options()) as fresh:
        reader = Chronicarius(fresh)
        with _counted(fresh) as first:
            assert reader.get_acta(OWNER, fork.id, last_n=20) == window
        with _counted(fresh) as second:
            assert reader.get_acta(OWNER, fork.id, last_n=20) == window
    assert (len(first), len(second)) == (4, 1)  # layout, its home, layout again, window; then the window
