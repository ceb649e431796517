-- Raises a stream's delivered mark (and its index) to at least ARGV's, or
-- with seq 'all' to the stream's high-water mark (a JSON-only response
-- stands for every event of its stream). ARGV: stream, seq, index.
-- Answers {'ok', 1|0 (record kept)} or {'unknown'}.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m then
  return { 'unknown' }
end
local r = rec_get(tonumber(ARGV[1]))
if not r then
  return { 'ok', 0 }
end
if ARGV[2] == 'all' then
  r.delivered = math.max(r.delivered, r.high)
  r.dindex = math.max(r.dindex, r.published)
else
  r.delivered = math.max(r.delivered, tonumber(ARGV[2]))
  r.dindex = math.max(r.dindex, tonumber(ARGV[3]))
end
redis.call('HSET', S, ARGV[1], rec_str(r))
return { 'ok', 1 }
