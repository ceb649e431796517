-- Appends a batch of events, in order, allocating dense seqs, and trims the
-- window by events and by bytes in the same step, exactly as the ring's
-- Producer::publish evicts. Validates the whole batch first: a refused
-- batch writes nothing.
-- ARGV: n, then n triples (stream, nonce, payload).
-- Answers {'ok', first_seq}, {'unknown'}, {'ended', stream},
-- {'no_stream', stream} or {'too_large', index, len, budget}.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m then
  return { 'unknown' }
end
local n = tonumber(ARGV[1])
local recs = {}
for k = 0, n - 1 do
  local sid = ARGV[2 + 3 * k]
  local len = #ARGV[4 + 3 * k]
  if len > m.budget then
    return { 'too_large', k, len, m.budget }
  end
  if not recs[sid] then
    local r = rec_get(tonumber(sid))
    if not r then
      return { 'no_stream', sid }
    end
    if r.ended == 1 then
      return { 'ended', sid }
    end
    recs[sid] = r
  end
end
local first_seq = m.head + 1
local old_oldest = m.oldest
local lens = {}
local function len_of(seq)
  if lens[seq] then
    return lens[seq]
  end
  local e = entry_get(seq)
  return #e['p']
end
for k = 0, n - 1 do
  local sid, nonce, payload = ARGV[2 + 3 * k], ARGV[3 + 3 * k], ARGV[4 + 3 * k]
  local len = #payload
  local seq = m.head + 1
  if seq - m.oldest >= m.cap then
    m.bytes = m.bytes - len_of(m.oldest)
    m.oldest = m.oldest + 1
  end
  while m.bytes + len > m.budget do
    m.bytes = m.bytes - len_of(m.oldest)
    m.oldest = m.oldest + 1
  end
  local r = recs[sid]
  local prev = r.high
  local index = r.published + 1
  if prev == 0 then
    r.first = seq
  end
  r.published = index
  r.high = seq
  redis.call('XADD', L, fmt(seq) .. '-0', 's', sid, 'i', fmt(index), 'v', fmt(prev), 'n', nonce, 'p', payload)
  lens[seq] = len
  m.bytes = m.bytes + len
  m.head = seq
end
for sid, r in pairs(recs) do
  redis.call('HSET', S, sid, rec_str(r))
end
if m.oldest > old_oldest then
  redis.call('XTRIM', L, 'MINID', fmt(m.oldest) .. '-0')
end
meta_put(m)
touch(m)
announce(fmt(m.head))
return { 'ok', first_seq }
