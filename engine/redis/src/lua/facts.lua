-- Everything the decision table (docs/SPEC.md §4.2, rows 3 to 7) may read
-- of a session, from one consistent state: engine/src/session/table.rs's
-- SessionFacts, fetched in one call. Resets the idle clock of a session
-- the caller may see.
-- ARGV: has_owner, owner, mode ('stream' | 'session'), cursor seq q (0 for
-- none; 'd' for stream s's delivered mark: where the standalone stream's
-- backlog starts), cursor stream s (0 for none), the head the calling node
-- has seen (0 for none; above the store's, see note_seen).
-- Answers {'unknown'} or
-- {'ok', ns, head, oldest, opened, ru, q_stream, q_nonce, o_stream, o_nonce,
--  rec_s, tomb_s, fr_seq, fr_index, fr_prev, recs, window, q, rw, h_nonce}
-- (h_nonce: the nonce of the event at the head, '' for none)
-- where a stream of 0, an empty string and fr_seq 0 mean "none"; recs is
-- {id, record, ...} (session mode), window is {seq, stream, prev, ...}
-- (session mode, only when some stream has undelivered events).
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m or not owner_ok(m, ARGV[1], ARGV[2]) then
  return { 'unknown' }
end
touch(m)
note_seen(m, tonumber(ARGV[6] or '0') or 0)
local mode, q, s = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
if ARGV[4] == 'd' then
  local r = rec_get(s)
  q = r and r.delivered or 0
end
local function entry_of(seq)
  if seq < m.oldest or seq > m.head or seq == 0 then
    return 0, ''
  end
  local e = entry_get(seq)
  if not e then
    return 0, ''
  end
  return tonumber(e['s']), e['n']
end
local q_stream, q_nonce = entry_of(q)
local o_stream, o_nonce = entry_of(m.oldest)
local rec_s, tomb_s = '', ''
local fr_seq, fr_index, fr_prev = 0, 0, 0
local recs, window = {}, {}
if s > 0 then
  rec_s = redis.call('HGET', S, fmt(s)) or ''
  tomb_s = redis.call('HGET', T, fmt(s)) or ''
end
if mode == 'stream' and s > 0 then
  local from = math.max(q + 1, m.oldest)
  if rec_s ~= '' and from > q + 1 and from <= m.head then
    -- The stream's first retained event at or after `from`.
    local start = fmt(from) .. '-0'
    while fr_seq == 0 do
      local page = redis.call('XRANGE', L, start, '+', 'COUNT', 512)
      if #page == 0 then
        break
      end
      for _, it in ipairs(page) do
        local e = fields(it[2])
        if not e['t'] and tonumber(e['s']) == s then
          fr_seq = tonumber(string.match(it[1], '^(%d+)'))
          fr_index, fr_prev = tonumber(e['i']), tonumber(e['v'])
          break
        end
      end
      start = '(' .. page[#page][1]
    end
  end
elseif mode == 'session' then
  recs = redis.call('HGETALL', S)
  local pending = false
  for k = 2, #recs, 2 do
    local r = rec_parse(recs[k])
    if r.high > r.delivered then
      pending = true
    end
  end
  if pending and q > 0 then
    local start = fmt(m.oldest) .. '-0'
    while true do
      local page = redis.call('XRANGE', L, start, '+', 'COUNT', 512)
      if #page == 0 then
        break
      end
      for _, it in ipairs(page) do
        local e = fields(it[2])
        if not e['t'] then
          window[#window + 1] = tonumber(string.match(it[1], '^(%d+)'))
          window[#window + 1] = tonumber(e['s'])
          window[#window + 1] = tonumber(e['v'])
        end
      end
      start = '(' .. page[#page][1]
    end
  end
end
local _, h_nonce = entry_of(m.head)
return { 'ok', m.ns, m.head, m.oldest, m.opened, m.ru, q_stream, q_nonce, o_stream, o_nonce, rec_s, tomb_s,
  fr_seq, fr_index, fr_prev, recs, window, q, m.rw, h_nonce }
