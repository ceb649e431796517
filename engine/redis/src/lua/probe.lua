-- The safety net's look at a session (a follower's pushed wake-up may be
-- lost): the id of the log's last entry, without its fields. Answers
-- {'ok', last} ('' while the log is empty) or {'unknown'}. Reads, writes
-- nothing, refreshes no TTL.
local last = redis.pcall('XREVRANGE', L, '+', '-', 'COUNT', 1)
if failed(last) then
  return { 'corrupt', L }
end
if last[1] then
  return { 'ok', last[1][1] }
end
if redis.call('EXISTS', M) == 0 then
  return { 'unknown' }
end
return { 'ok', '' }
