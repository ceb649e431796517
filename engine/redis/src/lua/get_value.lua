-- One of the application's values of the session (set_value.lua). ARGV:
-- name. Answers {'ok', value}, {'ok'} when it has none, or {'unknown'}.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m then
  return { 'unknown' }
end
local v = redis.call('HGET', M, 'v:' .. ARGV[1])
if v then
  return { 'ok', v }
end
return { 'ok' }
