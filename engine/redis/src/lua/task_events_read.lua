-- Reads a task's events for a reader on any node: those after `after`
-- (ARGV[1]; -1: from the oldest kept) up to `acked` only, at most ARGV[2].
-- ARGV[3] now (ms), then the bounds max_events, max_bytes, max_age_ms:
-- events past the age bound are dropped first, so none is served older.
-- Returns {0} when the task has no stream (yet, or any more), else
-- {1, oldest, acked, next, ended, entries}.
if redis.call('EXISTS', KEYS[2]) == 0 then return {0} end
local after, count, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local max_events, max_bytes, max_age = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local next, oldest, bytes, acked = meta_num('next'), meta_num('oldest'), meta_num('bytes'), meta_num('acked')
if max_age > 0 then
  local o, b = trim(oldest, next, bytes, max_events, max_bytes, now - max_age)
  if o ~= oldest then
    redis.call('HSET', KEYS[2], 'oldest', o, 'bytes', b)
    oldest = o
  end
end
local from = oldest
if after >= 0 then from = after + 1 end
local entries = {}
if from >= oldest and from < acked then
  entries = redis.call('XRANGE', KEYS[1], int(from + 1) .. '-0', int(acked), 'COUNT', count)
end
return {1, oldest, acked, next, meta_num('ended'), entries}
