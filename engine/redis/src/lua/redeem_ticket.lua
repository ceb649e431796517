-- Redeems a migration ticket once, for a caller that sees the session, and
-- marks the session migrated. ARGV: ticket, has_owner, owner.
-- Answers {'ok', cursor seq}, {'expired'}, {'foreign'} (another caller's),
-- {'rewritten', head, cursor} or {'unknown'}.
--
-- 'rewritten': the store no longer has the cursor's event as the client
-- saw it, so the events after its seq are not the ones that followed it (a
-- failover lost them and may have reused the seqs): the nonce at the
-- cursor's seq is not the ticket's check, or the seq is beyond the head
-- (the ticket was issued when it was not, so the store lost it; recorded
-- as rw, as a node that saw a higher head does). A cursor whose event has
-- been trimmed cannot be compared (the gap check then decides), as on a
-- resume. The ticket is used up either way.
local m, refused = checked_meta()
if refused then
  return refused
end
local v = redis.call('HGET', K, ARGV[1])
if not v then
  return { 'unknown' }
end
if not owner_ok(m, ARGV[2], ARGV[3]) then
  return { 'foreign' }
end
redis.call('HDEL', K, ARGV[1])
local cursor, expires, check, wire = string.match(v, '^(%d+) (%d+) (%S+) (%S+)$')
if not cursor then
  return { 'unknown' }
end
if tonumber(expires) <= now_ms() then
  return { 'expired' }
end
local q = tonumber(cursor)
if q > 0 and wire ~= '-' then
  if q > m.head then
    note_seen(m, q)
    return { 'rewritten', m.head, wire }
  end
  if check ~= '-' and q >= m.oldest then
    local e = entry_get(q)
    if e and e['n'] ~= check then
      return { 'rewritten', m.head, wire }
    end
  end
end
redis.call('HSET', M, 'mig', '1')
touch(m)
announce('migrated')
return { 'ok', q }
