-- Redeems a migration ticket once, for a caller that sees the session, and
-- marks the session migrated. ARGV: ticket, has_owner, owner.
-- Answers {'ok', cursor seq}, {'expired'}, {'foreign'} (another caller's)
-- or {'unknown'}.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m then
  return { 'unknown' }
end
local v = redis.call('HGET', K, ARGV[1])
if not v then
  return { 'unknown' }
end
if not owner_ok(m, ARGV[2], ARGV[3]) then
  return { 'foreign' }
end
redis.call('HDEL', K, ARGV[1])
local cursor, expires = string.match(v, '^(%d+) (%d+)$')
if tonumber(expires) <= now_ms() then
  return { 'expired' }
end
redis.call('HSET', M, 'mig', '1')
touch(m)
announce('migrated')
return { 'ok', tonumber(cursor) }
