"""Bringing chronica written by an earlier chronica-redis up to date (``migrate``).

Earlier versions kept no idle indexes and no positions hash: their acta read back as before
(no native form, no ``answers``, positions as written), and an actum is found by id through a
walk of the stream, but retention would not find their chronica. ``migrate`` walks every
chronicum's hash (``SCAN`` on every node, the key names held in memory), adds the idle index
entries it lacks (never moving one that is there) and fills its positions hash, a thousand acta a
script. Safe to repeat, and to run while the store is in use.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import unquote

from chronica_core.erasure import owner_digest
from chronica_core.plans import Plan
from chronica_core.retention import last_activity
from chronica_redis import scripts
from chronica_redis.keys import family_keys, micros
from chronica_redis.operations import Call, Operation, Run, Scan
from chronica_redis.plans import CHRONICUM_FIELDS, RedisPlans, chronicum_of

__all__ = ["POSITIONS", "POSITIONS_STEP", "migrate", "parse_meta_key"]

POSITIONS_STEP: Final = 1000
"""How many acta one :data:`POSITIONS` script adds to a positions hash."""

POSITIONS: Final = scripts.Script(
    "positions",
    """
-- KEYS: chronicum, acta, positions. ARGV: the entry id to go on after ('' from the first), how many.
-- Adds the positions of that many acta to the hash, unless it holds all of them already.
-- Returns '' when done, else the last entry id read (go on after it).
local state = redis.call('HMGET', KEYS[1], 'owner', 'seq', 'base')
if not state[1] then return '' end
if redis.call('HLEN', KEYS[3]) >= tonumber(state[2]) - tonumber(state[3] or '0') then return '' end
local from = '-'
if ARGV[1] ~= '' then from = '(' .. ARGV[1] end
local chunk = redis.call('XRANGE', KEYS[2], from, '+', 'COUNT', ARGV[2])
for _, entry in ipairs(chunk) do
  redis.call('HSET', KEYS[3], entry[2][2], string.match(entry[1], '^(%d+)'))
end
if #chunk < tonumber(ARGV[2]) then return '' end
return chunk[#chunk][1]
""",
)

_GLOB: Final = str.maketrans({"*": "\\*", "?": "\\?", "[": "\\[", "]": "\\]", "\\": "\\\\"})


def parse_meta_key(prefix: str, key: str) -> tuple[str, str] | None:
    """The family root and the chronicum id of a chronicum's hash key (``None``: not one).

    ``<prefix>:{<root>}:c`` is a root's (or a fork's home); ``<prefix>:{<root>}:x:<id>:c`` a fork's.
    """
    start = f"{prefix}:{{"
    if not key.startswith(start) or not key.endswith(":c"):
        return None
    root, _, rest = key[len(start) : -2].partition("}")
    if rest == "":
        return unquote(root), unquote(root)
    if rest.startswith(":x:"):
        return unquote(root), unquote(rest[3:])
    return None


def migrate(plans: RedisPlans) -> Plan[Operation, int]:
    """Add the idle index entries and positions every live chronicum lacks; return how many were looked at."""
    where = "migrate"
    pattern = f"{plans.prefix.translate(_GLOB)}:{{*}}:c"
    names: list[str] = yield from plans.run(Scan(pattern), where)
    looked = 0
    for name in names:
        parsed = parse_meta_key(plans.prefix, name)
        if parsed is None:
            continue
        keys = family_keys(plans.prefix, *parsed)
        if keys.meta != name:
            continue
        row = yield from plans.run(Call(("HMGET", keys.meta, *CHRONICUM_FIELDS)), where)
        chronicum = chronicum_of(keys.chronicum_id, row)
        if chronicum is None:  # a fork's home, or an erased chronicum's marker
            continue
        activity = micros(last_activity(chronicum))
        yield from plans.idle(
            scripts.IDLE_ADD, owner_digest(chronicum.owner_id), chronicum.id, activity, where
        )
        after = ""
        while True:
            operation = Run(
                POSITIONS, (keys.meta, keys.acta, keys.positions), (after, POSITIONS_STEP), writes=True
            )
            after = yield from plans.run(operation, where)
            if not after:
                break
        looked += 1
    return looked
