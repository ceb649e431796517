-- Appends a batch of events, in order, allocating dense seqs, and trims the
-- window by events and by bytes in the same step, exactly as the ring's
-- Producer::publish evicts. Validates the whole batch first: a refused
-- batch writes nothing.
-- ARGV: n, guard, origin (the writing node, '' for none: each event records
-- it, so that the node's follower need not read its own events back), then n
-- triples (stream, nonce, payload). With a guard (a batch number, '' for
-- none) KEYS[8] holds "<number> <first seq> <n> <indexes>" of the last batch
-- its queue wrote: a batch is written only if it is the next one, so that
-- batches a queue pipelines are written in its order or not at all
-- (appender.rs); the last one sent again is answered as it was, not written
-- twice. A refused batch leaves the number as it was.
-- Answers {'ok', first_seq, indexes}, where indexes is "<stream>:<index>,..."
-- (each stream of the batch, in the order it first appears, with the index
-- in its stream of its first event of the batch), {'unknown'},
-- {'ended', stream}, {'no_stream', stream}, {'too_large', index, len, budget}
-- or {'order', last} (not the next batch of its queue: nothing written).
local guard = ARGV[2]
if guard ~= '' then
  local g = redis.pcall('GET', KEYS[8])
  if failed(g) then
    return { 'corrupt', KEYS[8] }
  end
  -- No number yet (a new queue, or its key expired while it was idle):
  -- batch 1 is next; a later one is answered 'order' with 0 and sent again
  -- as 1.
  local last, first, count, indexes = string.match(g or '0 0 0 ', '^(%d+) (%d+) (%d+) ?(.*)$')
  last = tonumber(last or '0')
  if tonumber(guard) == last and tonumber(count) == tonumber(ARGV[1]) then
    -- The last batch written, sent again (the cluster client retries a
    -- command whose answer it lost): written once, answered alike.
    return { 'ok', tonumber(first), indexes or '' }
  end
  if tonumber(guard) ~= last + 1 then
    return { 'order', last }
  end
end
local m, bad = meta_read()
if bad then
  return { 'corrupt', M }
end
if not m then
  return { 'unknown' }
end
-- The other keys this append writes, read first (their types checked).
local blen = redis.pcall('LLEN', B)
if failed(blen) then
  return { 'corrupt', B }
end
local llen = redis.pcall('XLEN', L)
if failed(llen) then
  return { 'corrupt', L }
end
local n = tonumber(ARGV[1])
local recs = {}
-- Each stream of the batch, in the order it first appears, with the index
-- of its first event of the batch.
local firsts = {}
local last_sid
for k = 0, n - 1 do
  local sid = ARGV[4 + 3 * k]
  local len = #ARGV[6 + 3 * k]
  if len > m.budget then
    return { 'too_large', k, len, m.budget }
  end
  if sid ~= last_sid and not recs[sid] then
    local v = redis.pcall('HGET', S, sid)
    if failed(v) then
      return { 'corrupt', S }
    end
    local r = rec_parse(v)
    if not r then
      return { 'no_stream', sid }
    end
    if r.ended == 1 then
      return { 'ended', sid }
    end
    recs[sid] = r
    firsts[#firsts + 1] = sid .. ':' .. fmt(r.published + 1)
  end
  last_sid = sid
end
local indexes = table.concat(firsts, ',')
local first_seq = write_events(m, recs, ARGV, 4, n, blen, ARGV[3])
meta_put(m)
-- An empty log or lengths list may have just been created: its TTL then.
touch_due(m, llen == 0 or blen == 0)
if guard ~= '' then
  redis.call('SET', KEYS[8], guard .. ' ' .. fmt(first_seq) .. ' ' .. ARGV[1] .. ' ' .. indexes, 'PX', m.ttl)
end
announce(fmt(m.head) .. ':' .. fmt(m.ctl))
return { 'ok', first_seq, indexes }
