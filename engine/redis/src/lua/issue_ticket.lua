-- Issues a migration ticket (docs/SPEC.md §4.3) for a caller that sees the
-- session: the client's cursor, valid for ttl ms (Redis's clock), at most
-- `max` outstanding per session (expired ones are dropped first).
-- ARGV: has_owner, owner, ticket, cursor seq (0 for none), ttl ms, max,
-- the cursor's check ('-' for none: 16 hex digits, the nonce its event had
-- when the client saw it), the cursor's wire form ('-' for none).
-- Answers {'ok', expires_ms}, {'too_many', max} or {'unknown'}.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m or not owner_ok(m, ARGV[1], ARGV[2]) then
  return { 'unknown' }
end
local now = now_ms()
local all = redis.call('HGETALL', K)
local live = 0
for k = 1, #all, 2 do
  local _, expires = string.match(all[k + 1], '^(%d+) (%d+)')
  if not expires or tonumber(expires) <= now then
    redis.call('HDEL', K, all[k])
  else
    live = live + 1
  end
end
local max = tonumber(ARGV[6])
if live >= max then
  return { 'too_many', max }
end
local expires = now + tonumber(ARGV[5])
redis.call('HSET', K, ARGV[3], ARGV[4] .. ' ' .. fmt(expires) .. ' ' .. (ARGV[7] or '-') .. ' ' .. (ARGV[8] or '-'))
touch(m)
return { 'ok', expires }
