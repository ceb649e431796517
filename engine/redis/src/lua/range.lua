-- Reads up to ARGV[2] retained events from seq ARGV[1] on, in seq order
-- (of stream ARGV[3] only, unless it is 0), up to seq ARGV[4] at most.
-- Answers {'ok', oldest, head, seq, stream, index, nonce, payload, ...}
-- (the whole page; the caller checks it starts where it needed) or
-- {'unknown'} when the session is gone.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m then
  return { 'unknown' }
end
local from, count, only, upto = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local out = { 'ok', m.oldest, m.head }
local start = fmt(math.max(from, 1)) .. '-0'
local got = 0
while got < count do
  local page = redis.call('XRANGE', L, start, fmt(upto) .. '-0', 'COUNT', math.max(count - got, 64))
  if #page == 0 then
    break
  end
  for _, it in ipairs(page) do
    local e = fields(it[2])
    local st = tonumber(e['s'])
    if not e['t'] and (only == 0 or st == only) then
      out[#out + 1] = tonumber(string.match(it[1], '^(%d+)'))
      out[#out + 1] = st
      out[#out + 1] = tonumber(e['i'])
      out[#out + 1] = e['n']
      out[#out + 1] = e['p']
      got = got + 1
      if got >= count then
        break
      end
    end
  end
  start = '(' .. page[#page][1]
end
return out
