-- The safety net's look at a session (a follower's pushed wake-up may be
-- lost): the id of the log's last entry and its nonce (an event's; '' for a
-- control entry), without its payload, and the meta's ctl (how many control
-- entries the log ever had). Answers {'ok', last, nonce, ctl} (last '' while
-- the log is empty) or {'unknown'}. Reads, writes nothing, refreshes no TTL.
local last = redis.pcall('XREVRANGE', L, '+', '-', 'COUNT', 1)
if failed(last) then
  return { 'corrupt', L }
end
local ctl = redis.call('HGET', M, 'ctl')
if last[1] then
  return { 'ok', last[1][1], fields(last[1][2])['n'] or '', ctl or '0' }
end
if redis.call('EXISTS', M) == 0 then
  return { 'unknown' }
end
return { 'ok', '', '', ctl or '0' }
