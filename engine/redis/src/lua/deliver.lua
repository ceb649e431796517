-- Raises a stream's delivered mark (and its index) to at least ARGV's, or
-- with seq 'all' to the stream's high-water mark (a JSON-only response
-- stands for every event of its stream). ARGV: stream, seq, index, check
-- (the nonce of the event at seq as the marking node holds it, or '').
-- Answers {'ok', 1|0 (record kept)}, {'unknown'}, or {'rewritten'} when the
-- event at seq, still retained, has another nonce, or seq is beyond the
-- store's head (then recorded as lost, see note_seen): the node's replica holds
-- an event a failover lost, and marking would count the store's other event
-- at that seq as delivered to a client that never got it.
local m, bad = meta_read()
if bad then
  return { 'corrupt', M }
end
if not m then
  return { 'unknown' }
end
local v = redis.pcall('HGET', S, ARGV[1])
if failed(v) then
  return { 'corrupt', S }
end
local r = rec_parse(v)
if not r then
  return { 'ok', 0 }
end
if ARGV[2] == 'all' then
  r.delivered = math.max(r.delivered, r.high)
  r.dindex = math.max(r.dindex, r.published)
else
  if ARGV[4] ~= '' then
    local q = tonumber(ARGV[2])
    if q > m.head then
      -- The node holds an event beyond the store's head: one a failover
      -- lost (the store's next event at that seq will be another).
      note_seen(m, q)
      return { 'rewritten' }
    end
    local e, bad_log = entry_read(q)
    if bad_log then
      return { 'corrupt', L }
    end
    if e and e['n'] ~= ARGV[4] then
      return { 'rewritten' }
    end
  end
  r.delivered = math.max(r.delivered, tonumber(ARGV[2]))
  r.dindex = math.max(r.dindex, tonumber(ARGV[3]))
end
redis.call('HSET', S, ARGV[1], rec_str(r))
return { 'ok', 1 }
