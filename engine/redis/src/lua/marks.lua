-- A stream's high-water and delivered marks. ARGV: stream.
-- Answers {'ok', high, delivered} (0, 0 for a stream whose record is gone)
-- or {'unknown'}.
local m, refused = checked_meta()
if refused then
  return refused
end
local r = rec_get(tonumber(ARGV[1]))
if not r then
  return { 'ok', 0, 0 }
end
return { 'ok', r.high, r.delivered }
