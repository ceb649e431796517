-- Pins the session while node ARGV[1] has a connection open on it (ARGV[2]
-- '1'), or lets go of that node's pin ('0'). A pinned session does not
-- expire: its keys carry no TTL (touch and touch_due leave them so, also
-- keys created meanwhile), instead of a follower refreshing them while it
-- is idle. The last pin to go gives every key the idle timeout again, from
-- now, as a request does. Idempotent: a node pins once, however often it
-- asks. Answers {'ok', pins} or {'unknown'}.
local m, refused = checked_meta()
if refused then
  return refused
end
local field = 'p:' .. ARGV[1]
if ARGV[2] == '1' then
  if redis.call('HSETNX', M, field, '1') == 1 then
    m.pins = redis.call('HINCRBY', M, 'pins', 1)
  end
  for i = 1, 7 do
    redis.call('PERSIST', KEYS[i])
  end
else
  if redis.call('HDEL', M, field) == 1 then
    m.pins = redis.call('HINCRBY', M, 'pins', -1)
  end
  if m.pins <= 0 then
    redis.call('HDEL', M, 'pins')
    m.pins = 0
    touch(m)
    redis.call('HSET', M, 'tu', fmt(now_ms()))
  end
end
return { 'ok', m.pins }
