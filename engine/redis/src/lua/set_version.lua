-- Records the session's negotiated protocol version (a legacy session
-- learns it after it exists). ARGV: version. Answers {'ok'} or {'unknown'}.
local m, refused = checked_meta()
if refused then
  return refused
end
redis.call('HSET', M, 'pv', ARGV[1])
return { 'ok' }
