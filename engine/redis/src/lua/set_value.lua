-- Records one of the application's values of the session (what a gateway
-- binds the session to), in the meta hash under 'v:' .. name, so that it
-- goes when the session does. ARGV: name, value. Answers {'ok'} or
-- {'unknown'}.
local m, refused = checked_meta()
if refused then
  return refused
end
redis.call('HSET', M, 'v:' .. ARGV[1], ARGV[2])
return { 'ok' }
