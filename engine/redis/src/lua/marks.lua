-- A stream's high-water and delivered marks. ARGV: stream.
-- Answers {'ok', high, delivered} (0, 0 for a stream whose record is gone)
-- or {'unknown'}.
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
  return { 'ok', 0, 0 }
end
return { 'ok', r.high, r.delivered }
