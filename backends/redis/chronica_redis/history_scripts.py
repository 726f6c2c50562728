"""The Lua scripts of the history capability: forks, layouts, windows over a lineage, acta by id.

Every chronicum of a lineage lives in its family root's slot (see :mod:`chronica_redis.keys`), so
each of these runs on one node, atomically: a window is one round trip whatever the lineage.
Their ``KEYS`` name every key they touch. Positions are stream entry ids (``<position>-0``).
"""

from __future__ import annotations

from typing import Final

from chronica_redis.scripts import Script

__all__ = ["FORK", "LAYOUT", "LOCATE", "POINT", "READ"]

_FIND: Final = """
local function entry_at(stream, position)
  local id = position .. '-0'
  return redis.call('XRANGE', stream, id, id)[1]
end

-- The position of actum `id` among a chronicum's own acta: from its positions hash, or, while the
-- hash lacks some (acta written before it was kept), from a walk through the stream.
local function position_of(meta, positions, stream, id)
  local found = redis.call('HGET', positions, id)
  if found then return tonumber(found) end
  local state = redis.call('HMGET', meta, 'seq', 'base')
  if not state[1] then return nil end
  if redis.call('HLEN', positions) >= tonumber(state[1]) - tonumber(state[2] or '0') then return nil end
  local from = '-'
  while true do
    local chunk = redis.call('XRANGE', stream, from, '+', 'COUNT', 1000)
    for _, entry in ipairs(chunk) do
      if entry[2][2] == id then return tonumber(string.match(entry[1], '^(%d+)')) end
    end
    if #chunk < 1000 then return nil end
    from = '(' .. chunk[#chunk][1]
  end
end

-- Find `ids` in segments given from ARGV[at] on (how many, then per segment: the indexes of its
-- chronicum's hash, positions hash and stream in KEYS, after, upto or ''): {segment, entry} each.
local function locate(at, ids)
  local found = {}
  local segments = tonumber(ARGV[at])
  for _, id in ipairs(ids) do
    for segment = 1, segments do
      local base = at + (segment - 1) * 5
      local upto = ARGV[base + 5]
      local position = position_of(KEYS[tonumber(ARGV[base + 1])], KEYS[tonumber(ARGV[base + 2])],
        KEYS[tonumber(ARGV[base + 3])], id)
      if position and position > tonumber(ARGV[base + 4])
          and (upto == '' or position <= tonumber(upto)) then
        found[#found + 1] = {segment, entry_at(KEYS[tonumber(ARGV[base + 3])], position)}
        break
      end
    end
  end
  return found
end
"""

POINT: Final = Script(
    "point",
    """
-- KEYS: the fork's home. ARGV: its family's root. 1: it now points there; 0: the id is taken.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'root', ARGV[1])
return 1
""",
)

FORK: Final = Script(
    "fork",
    """
-- KEYS: the fork's hash, its marks, the source's hash, its marks, then the fork set of each
-- chronicum of the fork's lineage but the fork. ARGV: owner, started, last ('' none), source id,
-- fork point actum id, base (the position it branched at), lineage, ancestors, fork id.
-- Returns 'missing' (the source is missing or erased), 'taken', or 'ok'. The fork inherits the
-- source's summary marks that stand at or before its base.
if redis.call('HEXISTS', KEYS[3], 'owner') == 0 then return 'missing' end
if redis.call('EXISTS', KEYS[1]) == 1 then return 'taken' end
local base = tonumber(ARGV[6])
for _, mark in ipairs(redis.call('LRANGE', KEYS[4], 0, -1)) do
  if tonumber(string.match(mark, '^(%d+):')) <= base then redis.call('RPUSH', KEYS[2], mark) end
end
for set = 5, #KEYS do redis.call('SADD', KEYS[set], ARGV[9]) end
local time = redis.call('TIME')
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'started', ARGV[2], 'seq', base, 'base', base,
  'from', ARGV[4], 'at', ARGV[5], 'lineage', ARGV[7], 'anc', ARGV[8], 'v', time[1] .. time[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'last', ARGV[3]) end
return 'ok'
""",
)

LAYOUT: Final = Script(
    "layout",
    """
-- KEYS: the chronicum's hash, its marks. Returns nil (missing or erased), else {owner, started,
-- last, source, fork point, base, lineage, version, marks}.
local state = redis.call('HMGET', KEYS[1], 'owner', 'started', 'last', 'from', 'at', 'base',
  'lineage', 'v')
if not state[1] then return false end
local answer = {}
for field = 1, 8 do answer[field] = state[field] or '' end
answer[9] = redis.call('LRANGE', KEYS[2], 0, -1)
return answer
""",
)

LOCATE: Final = Script(
    "locate",
    _FIND
    + """
-- KEYS: the hash of the chronicum whose lineage it is, then its segments' keys. ARGV: the
-- segments (see locate), then the ids. Returns nil when that chronicum is missing or erased,
-- else {segment, entry} for each id found.
if redis.call('HEXISTS', KEYS[1], 'owner') == 0 then return false end
local ids = {}
for item = 2 + tonumber(ARGV[1]) * 5, #ARGV do ids[#ids + 1] = ARGV[item] end
return locate(1, ids)
""",
)

READ: Final = Script(
    "read",
    _FIND
    + """
local function is_summary(entry)
  local fields = entry[2]
  for item = 13, #fields, 2 do
    if fields[item] == 's' then return true end
  end
  return false
end

-- How many of a list's positions (ascending) are at most `value`: a binary search by LINDEX.
local function count_upto(list, value)
  local n = redis.call('LLEN', list)
  if n == 0 then return 0 end
  if tonumber(redis.call('LINDEX', list, n - 1)) <= value then return n end
  if tonumber(redis.call('LINDEX', list, 0)) > value then return 0 end
  local low, high = 1, n - 1
  while low < high do
    local middle = math.floor((low + high) / 2)
    if tonumber(redis.call('LINDEX', list, middle)) <= value then low = middle + 1 else high = middle end
  end
  return low
end

-- A range read: the newest (or oldest) `limit` acta of a segment matching the filters' lists (none:
-- every actum), summaries skipped unless `summaries`. Returns the entries in the order read: newest
-- first for a read of the newest.
local function range(stream, marks, after, upto, limit, newest, summaries, lists)
  local want = limit
  if not summaries then
    local skipped = redis.call('LLEN', marks)
    if limit > 0 then want = limit + skipped elseif skipped > 0 then want = -1 end
  end
  local found = {}
  if upto and upto <= after then return found end
  if #lists == 0 then
    local low, high = (after + 1) .. '-0', '+'
    if upto then high = upto .. '-0' end
    if newest then
      if want > 0 then found = redis.call('XREVRANGE', stream, high, low, 'COUNT', want)
      else found = redis.call('XREVRANGE', stream, high, low) end
    else
      if want > 0 then found = redis.call('XRANGE', stream, low, high, 'COUNT', want)
      else found = redis.call('XRANGE', stream, low, high) end
    end
  else
    local positions = {}
    for _, list in ipairs(lists) do
      local low = count_upto(list, after)
      local high = redis.call('LLEN', list)
      if upto then high = count_upto(list, upto) end
      if high > low then
        local first, last = low, high - 1
        if want > 0 then
          if newest then first = math.max(low, high - want) else last = math.min(high - 1, low + want - 1) end
        end
        for _, position in ipairs(redis.call('LRANGE', list, first, last)) do
          positions[#positions + 1] = tonumber(position)
        end
      end
    end
    table.sort(positions)
    local from, to, step = 1, #positions, 1
    if newest then from, to, step = #positions, 1, -1 end
    for index = from, to, step do
      if want > 0 and #found >= want then break end
      local entry = entry_at(stream, positions[index])
      if entry then found[#found + 1] = entry end
    end
  end
  if want == limit then return found end
  local kept = {}
  for _, entry in ipairs(found) do
    if limit > 0 and #kept >= limit then break end
    if summaries or not is_summary(entry) then kept[#kept + 1] = entry end
  end
  return kept
end

-- KEYS: the chronicum's hash, its marks, then the keys the reads name. ARGV: how many reads, then
-- each: 'r', stream, marks (indexes in KEYS), after, upto ('' none), limit, newest ('1'), summaries
-- ('1'), how many lists, the lists' indexes; or 'p', stream, how many positions, the positions.
-- Then the segments the requests of responses read are looked for in ('0' none; see locate).
-- Returns nil (missing or erased), else {version, marks, {entries of each read, in the order read},
-- {found requests}}.
local state = redis.call('HMGET', KEYS[1], 'owner', 'v')
if not state[1] then return false end
local results = {}
local answers = {}
local at = 2
for _ = 1, tonumber(ARGV[1]) do
  local entries
  if ARGV[at] == 'r' then
    local lists = {}
    for list = 1, tonumber(ARGV[at + 8]) do lists[list] = KEYS[tonumber(ARGV[at + 8 + list])] end
    local upto = nil
    if ARGV[at + 4] ~= '' then upto = tonumber(ARGV[at + 4]) end
    entries = range(KEYS[tonumber(ARGV[at + 1])], KEYS[tonumber(ARGV[at + 2])], tonumber(ARGV[at + 3]),
      upto, tonumber(ARGV[at + 5]), ARGV[at + 6] == '1', ARGV[at + 7] == '1', lists)
    at = at + 9 + #lists
  else
    entries = {}
    local stream = KEYS[tonumber(ARGV[at + 1])]
    local count = tonumber(ARGV[at + 2])
    local positions = {}
    for item = 1, count do positions[item] = tonumber(ARGV[at + 2 + item]) end
    table.sort(positions)
    for _, position in ipairs(positions) do
      local entry = entry_at(stream, position)
      if entry then entries[#entries + 1] = entry end
    end
    at = at + 3 + count
  end
  results[#results + 1] = entries
  for _, entry in ipairs(entries) do
    local fields = entry[2]
    for item = 13, #fields, 2 do
      if fields[item] == 'w' then answers[#answers + 1] = fields[item + 1] end
    end
  end
end
local found = {}
if tonumber(ARGV[at]) > 0 and #answers > 0 then found = locate(at, answers) end
return {state[2] or '', redis.call('LLEN', KEYS[2]), results, found}
""",
)
