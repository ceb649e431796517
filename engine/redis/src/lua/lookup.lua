-- Finds a session for a caller and resets its idle clock.
-- ARGV: has_owner, owner. Answers {'ok', ns, head, protocol version,
-- migrated (1/0)} or
-- {'unknown'}.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m or not owner_ok(m, ARGV[1], ARGV[2]) then
  return { 'unknown' }
end
touch(m)
return { 'ok', m.ns, m.head, m.pv, m.mig and 1 or 0 }
