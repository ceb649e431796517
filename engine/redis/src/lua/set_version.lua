-- Records the session's negotiated protocol version (a legacy session
-- learns it after it exists). ARGV: version. Answers {'ok'} or {'unknown'}.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m then
  return { 'unknown' }
end
redis.call('HSET', M, 'pv', ARGV[1])
return { 'ok' }
