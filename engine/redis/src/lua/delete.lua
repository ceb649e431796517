-- Deletes a session (every key of it). ARGV: has_owner, owner.
-- Answers {'ok'} or {'unknown'} (none visible to this caller).
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m or not owner_ok(m, ARGV[1], ARGV[2]) then
  return { 'unknown' }
end
redis.call('DEL', M, L, S, T, O, K, B)
announce('deleted')
return { 'ok' }
