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
local events = {}
for k = 0, n - 1 do
  events[#events + 1] = { ARGV[2 + 3 * k], ARGV[3 + 3 * k], ARGV[4 + 3 * k] }
end
local first_seq = write_events(m, recs, events)
meta_put(m)
touch(m)
announce(fmt(m.head))
return { 'ok', first_seq }
