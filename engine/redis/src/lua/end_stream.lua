-- Ends a stream (idempotent), with a control entry after the event at the
-- head so that followers end it after its last event. ARGV: stream.
-- Answers {'ok'} or {'unknown'}.
local m, refused = checked_meta()
if refused then
  return refused
end
local r = rec_get(tonumber(ARGV[1]))
if r and r.ended == 0 then
  r.ended = 1
  redis.call('HSET', S, ARGV[1], rec_str(r))
  redis.call('XADD', L, fmt(m.head) .. '-*', 't', 'e', 's', ARGV[1])
  redis.call('HINCRBY', M, 'ctl', 1)
  announce('end')
end
touch(m)
return { 'ok' }
