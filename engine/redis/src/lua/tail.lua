-- What a follower of the session has not read yet: up to ARGV[2] log
-- entries after entry id ARGV[1] ("<seq>-<k>"), events and control entries
-- alike, in log order. Answers {'unknown'} or
-- {'ok', oldest, head, ns, at, migrated (1/0), ctl, kind, seq, k, stream, index,
-- nonce, payload, ...} where `at` is the nonce of the event at ARGV[1]'s seq ('' when it is
-- not retained): a follower compares it with the one it applied there, to
-- tell a log rewritten by a failover.
-- where kind is 'v' (an event), 'o' (an event node ARGV[4] wrote itself:
-- its payload is left out, the node has it) or 'e' (stream `stream` ended;
-- index, nonce and payload are empty). A session some node follows stays alive: this
-- resets its idle clock (at most once an eighth of the idle timeout,
-- touch_due). ARGV[3]: the head the follower has (note_seen).
local m, bad = meta_read()
if bad then
  return { 'corrupt', M }
end
if not m then
  return { 'unknown' }
end
local at_seq = tonumber(string.match(ARGV[1], '^(%d+)-'))
local at = ''
if at_seq and at_seq > 0 then
  local e, bad_log = entry_read(at_seq)
  if bad_log then
    return { 'corrupt', L }
  end
  if e then
    at = e['n']
  end
end
local page = redis.pcall('XRANGE', L, '(' .. ARGV[1], '+', 'COUNT', tonumber(ARGV[2]))
if failed(page) then
  return { 'corrupt', L }
end
note_seen(m, tonumber(ARGV[3] or '0') or 0)
touch_due(m, false)
local out = { 'ok', m.oldest, m.head, m.ns, at, m.mig and 1 or 0, m.ctl }
local skip = ARGV[4] or ''
for _, it in ipairs(page) do
  local e = fields(it[2])
  local seq, k = string.match(it[1], '^(%d+)-(%d+)$')
  if e['t'] then
    out[#out + 1] = e['t']
    out[#out + 1] = tonumber(seq)
    out[#out + 1] = tonumber(k)
    out[#out + 1] = tonumber(e['s'])
    out[#out + 1] = 0
    out[#out + 1] = ''
    out[#out + 1] = ''
  elseif skip ~= '' and e['o'] == skip then
    out[#out + 1] = 'o'
    out[#out + 1] = tonumber(seq)
    out[#out + 1] = tonumber(k)
    out[#out + 1] = tonumber(e['s'])
    out[#out + 1] = tonumber(e['i'])
    out[#out + 1] = e['n']
    out[#out + 1] = ''
  else
    out[#out + 1] = 'v'
    out[#out + 1] = tonumber(seq)
    out[#out + 1] = tonumber(k)
    out[#out + 1] = tonumber(e['s'])
    out[#out + 1] = tonumber(e['i'])
    out[#out + 1] = e['n']
    out[#out + 1] = e['p']
  end
end
return out
