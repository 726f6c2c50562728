"""The Lua scripts: each write, and each read that must see one chronicum whole, is one of these.

A script runs atomically on the node holding its keys, all of one chronicum (one hash slot; see
:mod:`chronica_redis.keys`). Redis 7 and Valkey replicate a script by its effects, so a script may
read the server's clock (``TIME``: a chronicum's layout version). An append's ``at`` is the
application host's clock (:func:`chronica_core.clock.now`, which also gives ``started_at``), passed
in and kept in the same step that decides the order; it never decreases along a chronicum (a
clock that went back, or another host's behind, gives the newest actum's ``at``).
They are sent by SHA-1 (``EVALSHA``) and loaded on a server that does not know them yet.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "ACTA_AFTER",
    "CREATE",
    "ERASE",
    "IDLE_ADD",
    "IDLE_DROP",
    "IDLE_SET",
    "IDLE_TOUCH",
    "NEWEST",
    "RECORD",
    "REOPEN",
    "WINDOW",
    "WITHDRAW",
    "Script",
]


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script and its SHA-1 (what ``EVALSHA`` names it by)."""

    name: str
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())


CREATE: Final = Script(
    "create",
    """
-- KEYS: chronicum. ARGV: owner, started. 1: created; 0: the id is taken (or erased).
-- Its layout version starts as the server's clock, in microseconds.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local time = redis.call('TIME')
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'started', ARGV[2], 'seq', 0, 'v', time[1] .. time[2])
return 1
""",
)

RECORD: Final = Script(
    "record",
    """
-- KEYS: chronicum, acta, keys, followed, positions, marks, then the index lists the acta go to.
-- ARGV: chronicum id, channel, idempotency key ('' for none), touch ('1': a kept write is written
-- over, so that WAIT confirms it), count, the idle index's step (microseconds), the summary
-- ('' for none; else its layout version, number of marks, first and last positions, each
-- followed by NUL), now (the application host's clock, microseconds since the epoch), then per
-- actum: id, kind, actor kind, actor, content, the number of its index
-- list (1 for the first after the six keys), how many items of optional fields follow (names and
-- values: n, d native form; w answers; s, l summarized range), then those items.
-- A tool response naming its request, or a summary, marks the chronicum 'shaped'.
-- Returns {'missing'}; {'kept', entries} (the write that used the key); {'stale'} (the summary's
-- layout version is not the chronicum's); {'ok', at, owner}: owner is '' unless the idle index is
-- to be moved to at (it was last moved a step or more before).
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then return {'missing'} end
local key = ARGV[3]
if key ~= '' then
  local prior = redis.call('HGET', KEYS[3], key)
  if prior then
    local first, count = string.match(prior, '^(%d+):(%d+)$')
    if ARGV[4] == '1' then redis.call('HSET', KEYS[3], key, prior) end
    return {'kept', redis.call('XRANGE', KEYS[2], first .. '-0', '+', 'COUNT', count)}
  end
end
local summary = nil
if ARGV[7] ~= '' then
  summary = {}
  for part in string.gmatch(ARGV[7], '([^%z]*)%z') do summary[#summary + 1] = part end
  local version = redis.call('HGET', KEYS[1], 'v') or ''
  if version ~= summary[1] or redis.call('LLEN', KEYS[6]) ~= tonumber(summary[2]) then
    return {'stale'}
  end
end
local state = redis.call('HMGET', KEYS[1], 'seq', 'last', 'x')
local seq = tonumber(state[1])
local at = ARGV[8]
if state[2] and tonumber(state[2]) > tonumber(at) then at = state[2] end
local first = seq + 1
local shaped = summary ~= nil
local base = 9
for _ = 1, tonumber(ARGV[5]) do
  seq = seq + 1
  local entry = {'i', ARGV[base], 'k', ARGV[base + 1], 'a', ARGV[base + 2], 'r', ARGV[base + 3],
    'c', ARGV[base + 4], 't', at}
  local extras = tonumber(ARGV[base + 6])
  for item = base + 7, base + 6 + extras, 2 do
    entry[#entry + 1] = ARGV[item]
    entry[#entry + 1] = ARGV[item + 1]
    if ARGV[item] == 'w' then shaped = true end
  end
  redis.call('XADD', KEYS[2], string.format('%d-0', seq), unpack(entry))
  redis.call('HSET', KEYS[5], ARGV[base], seq)
  redis.call('RPUSH', KEYS[6 + tonumber(ARGV[base + 5])], seq)
  if summary then
    redis.call('RPUSH', KEYS[6], seq .. ':' .. summary[3] .. ':' .. summary[4] .. ':' .. ARGV[base + 2])
  end
  base = base + 7 + extras
end
redis.call('HSET', KEYS[1], 'seq', seq, 'last', at)
if shaped then redis.call('HSET', KEYS[1], 'shaped', '1') end
if key ~= '' then redis.call('HSET', KEYS[3], key, string.format('%d:%d', first, seq - first + 1)) end
if redis.call('EXISTS', KEYS[4]) == 1 then redis.call('PUBLISH', ARGV[2], ARGV[1]) end
local indexed = ''
if tonumber(at) - tonumber(state[3] or '0') >= tonumber(ARGV[6]) then
  redis.call('HSET', KEYS[1], 'x', at)
  indexed = owner
end
return {'ok', at, indexed}
""",
)

WINDOW: Final = Script(
    "window",
    """
-- KEYS: chronicum, acta, then the index lists the filters keep (none: every actum).
-- ARGV: last n (0: all). Returns nil for a missing or erased chronicum, 'stale' for one with a
-- summary or a tool response naming its request (read through windows), else the entries, oldest
-- first.
-- With filters: the last n of each list, merged; then the entries, in one range read when they lie
-- within four times their number of each other, else one lookup each.
local state = redis.call('HMGET', KEYS[1], 'owner', 'shaped')
if not state[1] then return false end
if state[2] then return 'stale' end
local n = tonumber(ARGV[1])
if #KEYS == 2 then
  if n <= 0 then return redis.call('XRANGE', KEYS[2], '-', '+') end
  local newest = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', n)
  local window = {}
  for position = #newest, 1, -1 do window[#window + 1] = newest[position] end
  return window
end
local seqs = {}
for list = 3, #KEYS do
  local part
  if n > 0 then part = redis.call('LRANGE', KEYS[list], -n, -1)
  else part = redis.call('LRANGE', KEYS[list], 0, -1) end
  for _, seq in ipairs(part) do seqs[#seqs + 1] = tonumber(seq) end
end
table.sort(seqs)
local from = 1
if n > 0 and #seqs > n then from = #seqs - n + 1 end
local window = {}
if #seqs == 0 then return window end
local first, last = seqs[from], seqs[#seqs]
if last - first < 4 * (#seqs - from + 1) then
  -- the kept acta are close together: one range read, the others passed over
  local kept = {}
  for position = from, #seqs do kept[seqs[position]] = true end
  local span = redis.call('XRANGE', KEYS[2], string.format('%d-0', first), string.format('%d-0', last))
  for _, entry in ipairs(span) do
    if kept[tonumber(string.match(entry[1], '^(%d+)'))] then window[#window + 1] = entry end
  end
  return window
end
for position = from, #seqs do
  local id = string.format('%d-0', seqs[position])
  window[#window + 1] = redis.call('XRANGE', KEYS[2], id, id)[1]
end
return window
""",
)

ACTA_AFTER: Final = Script(
    "acta_after",
    """
-- KEYS: chronicum, acta, followed. ARGV: after ('' from the first actum), limit, how many entries
-- to look at, the entry id to look below ('' from the newest), the milliseconds to mark the
-- chronicum followed for ('' not to).
-- Returns nil (missing or erased), {'page', entries}, {'absent'}, or {'more', entry id}: not
-- found among the entries looked at; look again below that entry.
if redis.call('HEXISTS', KEYS[1], 'owner') == 0 then return false end
if ARGV[5] ~= '' then redis.call('SET', KEYS[3], '1', 'PX', ARGV[5]) end
local limit = tonumber(ARGV[2])
if ARGV[1] == '' then return {'page', redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', limit)} end
local top = '+'
if ARGV[4] ~= '' then top = '(' .. ARGV[4] end
local looked = tonumber(ARGV[3])
local entries = redis.call('XREVRANGE', KEYS[2], top, '-', 'COUNT', looked)
for _, entry in ipairs(entries) do
  if entry[2][2] == ARGV[1] then
    return {'page', redis.call('XRANGE', KEYS[2], '(' .. entry[1], '+', 'COUNT', limit)}
  end
end
if #entries < looked then return {'absent'} end
return {'more', entries[#entries][1]}
""",
)

NEWEST: Final = Script(
    "newest",
    """
-- KEYS: chronicum, acta, followed. ARGV: the milliseconds to mark it followed for ('' not to).
-- Returns nil (missing or erased), '' (no acta) or the newest actum's id.
if redis.call('HEXISTS', KEYS[1], 'owner') == 0 then return false end
if ARGV[1] ~= '' then redis.call('SET', KEYS[3], '1', 'PX', ARGV[1]) end
local newest = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #newest == 0 then return '' end
return newest[1][2][2]
""",
)

ERASE: Final = Script(
    "erase",
    """
-- KEYS: the chronicum's 19 keys (hash first; see ChronicumKeys.every_key), then those of each
-- fork its fork set names. ARGV: owner digest, owner id ('' any owner), chronicum id, channel,
-- idle before ('' erase whatever the last activity; else microseconds: erase only if the last
-- activity of the chronicum and of each of its forks is before), how many forks, their ids.
-- Returns {'gone'} (no such key), {'other'} (a marker, or another owner's), {'active'} (not idle),
-- {'retry'} (its fork set is not the one given), or {'erased', acta, id, started, id, started...}:
-- the acta erased and each chronicum erased, its forks first.
local chronicum = redis.call('HMGET', KEYS[1], 'owner', 'started', 'seq', 'last', 'base')
if not chronicum[1] then
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'gone'} end
  return {'other'}
end
if ARGV[2] ~= '' and chronicum[1] ~= ARGV[2] then return {'other'} end
local forks = tonumber(ARGV[6])
if redis.call('SCARD', KEYS[7]) ~= forks then return {'retry'} end
local family = {}
for fork = 1, forks do
  local id = ARGV[6 + fork]
  if redis.call('SISMEMBER', KEYS[7], id) == 0 then return {'retry'} end
  local first = fork * 19 + 1
  local state = redis.call('HMGET', KEYS[first], 'owner', 'anc', 'started', 'seq', 'last', 'base')
  if state[1] and state[2] and string.find(state[2], '\\0' .. ARGV[3] .. '\\0', 1, true) then
    family[#family + 1] = {first, id, state[3], state[4], state[5], state[6]}
  end
end
family[#family + 1] = {1, ARGV[3], chronicum[2], chronicum[3], chronicum[4], chronicum[5]}
if ARGV[5] ~= '' then
  for _, member in ipairs(family) do
    local active = math.max(tonumber(member[3]), tonumber(member[5] or member[3]))
    if active >= tonumber(ARGV[5]) then return {'active'} end
  end
end
local answer = {'erased', 0}
for _, member in ipairs(family) do
  local first = member[1]
  answer[2] = answer[2] + tonumber(member[4]) - tonumber(member[6] or '0')
  local followed = redis.call('EXISTS', KEYS[first + 3])
  redis.call('DEL', unpack(KEYS, first, first + 18))
  redis.call('HSET', KEYS[first], 'erased', ARGV[1])
  if followed == 1 then redis.call('PUBLISH', ARGV[4], member[2]) end
  answer[#answer + 1] = member[2]
  answer[#answer + 1] = member[3]
end
return answer
""",
)

IDLE_TOUCH: Final = Script(
    "idle_touch",
    """
-- KEYS: the idle index, the owner's idle index. ARGV: last activity (microseconds), chronicum id.
-- Moves the chronicum's entry in both forward to that moment (adds it if absent; never moves back).
redis.call('ZADD', KEYS[1], 'GT', ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], 'GT', ARGV[1], ARGV[2])
return 1
""",
)

IDLE_ADD: Final = Script(
    "idle_add",
    """
-- KEYS: the idle index, the owner's idle index. ARGV: last activity (microseconds), chronicum id.
-- Adds the chronicum's entries where it has none (a create's, a reopen's, a fork's).
redis.call('ZADD', KEYS[1], 'NX', ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], 'NX', ARGV[1], ARGV[2])
return 1
""",
)

IDLE_SET: Final = Script(
    "idle_set",
    """
-- KEYS: the idle index, the owner's idle index. ARGV: last activity (microseconds), chronicum id.
-- Sets the entry of a chronicum found elsewhere in the indexes than its last activity (only where
-- it has one: an entry is added by a create, and dropped by an erasure).
redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], 'XX', ARGV[1], ARGV[2])
return 1
""",
)

IDLE_DROP: Final = Script(
    "idle_drop",
    """
-- KEYS: the idle index, the owner's idle index. ARGV: chronicum id. Drops its entries.
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
""",
)

REOPEN: Final = Script(
    "reopen",
    """
-- KEYS: chronicum. ARGV: owner digest, owner, started. 1: the marker was replaced; 0: nothing done.
if redis.call('HGET', KEYS[1], 'erased') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
local time = redis.call('TIME')
redis.call('HSET', KEYS[1], 'owner', ARGV[2], 'started', ARGV[3], 'seq', 0, 'v', time[1] .. time[2])
return 1
""",
)

WITHDRAW: Final = Script(
    "withdraw",
    """
-- KEYS: the chronicum's 19 keys (hash first; see ChronicumKeys.every_key). ARGV: owner digest,
-- chronicum id, channel. Turns a live chronicum that holds no acta (and is no fork) into its
-- marker, as ERASE does. Returns its 'started' when it did; false (nil) otherwise, nothing done.
local chronicum = redis.call('HMGET', KEYS[1], 'owner', 'started', 'seq', 'base')
if not chronicum[1] or chronicum[3] ~= '0' or chronicum[4] then return false end
local followed = redis.call('EXISTS', KEYS[4])
redis.call('DEL', unpack(KEYS))
redis.call('HSET', KEYS[1], 'erased', ARGV[1])
if followed == 1 then redis.call('PUBLISH', ARGV[3], ARGV[2]) end
return chronicum[2]
""",
)
