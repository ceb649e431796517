-- One of the application's values of the session (set_value.lua). ARGV:
-- name. Answers {'ok', value}, {'ok'} when it has none, or {'unknown'}.
local m, refused = checked_meta()
if refused then
  return refused
end
local v = redis.call('HGET', M, 'v:' .. ARGV[1])
if v then
  return { 'ok', v }
end
return { 'ok' }
