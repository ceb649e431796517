-- Where a new follower (a node's local replica) of the session starts: the
-- session's namespace, head, streams opened, the ids of its streams that
-- have not ended (every other id up to `opened` has),
-- the id of the log's last entry (the follower tails after it) and the
-- protocol version. ARGV: has_owner, owner. Answers {'unknown'} or
-- {'ok', ns, head, opened, last_seq, last_k, pv, {live ids, ascending},
-- migrated (1/0), nonce of the event at last_seq ('' for none)}.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m or not owner_ok(m, ARGV[1], ARGV[2]) then
  return { 'unknown' }
end
touch(m)
local live = {}
local all = redis.call('HGETALL', S)
for k = 1, #all, 2 do
  local r = rec_parse(all[k + 1])
  if r.ended == 0 then
    live[#live + 1] = tonumber(all[k])
  end
end
table.sort(live)
local last_seq, last_k = 0, 0
local top = redis.call('XREVRANGE', L, '+', '-', 'COUNT', 1)
if #top > 0 then
  local a, b = string.match(top[1][1], '^(%d+)-(%d+)$')
  last_seq, last_k = tonumber(a), tonumber(b)
end
local at = ''
if last_seq > 0 then
  local e = entry_get(last_seq)
  if e then
    at = e['n']
  end
end
return { 'ok', m.ns, m.head, m.opened, last_seq, last_k, m.pv, live, m.mig and 1 or 0, at }
