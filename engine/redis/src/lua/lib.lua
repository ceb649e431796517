-- Shared prelude of every gapless script (docs/SPEC.md §8.2).
--
-- Changes are announced on the channel named like the meta key with a
-- final 'n' instead of 'm' (a channel is no key: Redis Cluster broadcasts
-- it), so that nodes following the session read the log at once.
--
-- KEYS, all in the session's hash slot ({<session id>} is the hash tag):
--   1 meta     HASH   ns, ow (owner, absent for none), head, oldest, bytes,
--                     opened, swept, ru (absent for none), cap, budget, ttl,
--                     pv (the negotiated protocol version, '' before),
--                     mig ('1' once a WebSocket redeemed a ticket), rw (the
--                     highest seq a node saw that the store no longer has:
--                     lost in a failover; absent for none), tu (when the
--                     keys' TTLs were last refreshed, Redis's ms; touch_due),
--                     pins (how many nodes pin the session, each while it
--                     has a connection open on it; absent for none), p:<node>
--                     ('1' for each such node; pin.lua), sa (the standalone
--                     stream's holder; hold.lua), h:<name> (an
--                     application's holds; hold.lua), v:<name> (the
--                     application's values; set_value.lua), ctl (how many
--                     control entries the log ever had: an append announces
--                     "<head>:<ctl>", so that a follower that heard only
--                     heads knows whether it missed a stream's end)
--   2 log      STREAM one entry per retained event, id "<seq>-0"; fields
--                     s (stream), i (index in stream), v (previous seq of the
--                     stream, 0 for none), n (nonce, 16 hex), o (the node
--                     that wrote it, absent for none), p (payload).
--                     Control entries sort after the event at the head when
--                     they were written, id "<head>-<k>" (k >= 1), fields
--                     t ('e': the stream ended) and s; they take no seq.
--   3 streams  HASH   stream id -> "first high published delivered dindex ended"
--   4 tombs    HASH   stream id -> "first high" (reclaimed, fully delivered)
--   5 order    LIST   tombstoned stream ids, oldest first
--   6 tickets  HASH   migration ticket -> "cursor expires_ms check wire"
--                     (expiry by the server's clock; the cursor's check, 16
--                     hex, and its wire form, '-' for none)
--   7 lengths  LIST   the payload lengths of the retained events, oldest
--                     first, one element per append or per 64 runs of equal
--                     lengths (trimming reads these, not the log's entries;
--                     see lengths_push)
--
-- Numbers are Lua doubles: exact up to 2^53, far beyond any seq a session
-- reaches. They are printed with '%d' (tostring would print 1e+15).
--
-- Every script checks the types of the keys it uses before it writes, and
-- answers {'corrupt', key} on a key of another type (another program's data
-- under our prefix): it then writes nothing. Most ask TYPE of every key
-- (wrong_type); the hot ones (append, deliver, tail) make their own first
-- read of each key they use under pcall (failed), at no command of its own,
-- and refresh the keys' TTLs once an eighth of the TTL (touch_due), not at
-- every call.

local M, L, S, T, O, K, B = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]

local KEEP_TOMBSTONES = 256
local KEEP_UNDELIVERED = 256

-- The type of each of a session's keys.
local KEY_TYPES = { 'hash', 'stream', 'hash', 'hash', 'list', 'hash', 'list' }

local function wrong_type()
  for i = 1, 7 do
    local t = redis.call('TYPE', KEYS[i])['ok']
    if t ~= 'none' and t ~= KEY_TYPES[i] then
      return KEYS[i]
    end
  end
  return nil
end

local function fmt(n)
  return string.format('%d', n)
end

local function num(v, default)
  if v == false or v == nil then
    return default
  end
  local n = tonumber(v)
  if n == nil then
    return default
  end
  return n
end

-- Whether a command's answer under redis.pcall is an error: the hot
-- scripts (append, deliver, tail) read each key they write, or read first,
-- under pcall instead of asking every key's TYPE, so that a key of another
-- type is refused ({'corrupt', key}) before anything is written, at no
-- command of its own.
local function failed(v)
  return type(v) == 'table' and v.err ~= nil
end

local META_FIELDS = { 'ns', 'ow', 'head', 'oldest', 'bytes', 'opened', 'swept', 'ru', 'cap', 'budget', 'ttl', 'pv',
  'mig', 'rw', 'tu', 'pins', 'ctl' }

local function meta_parse(v)
  if not v[1] then
    return nil
  end
  return {
    ns = v[1], ow = v[2], head = num(v[3], 0), oldest = num(v[4], 1), bytes = num(v[5], 0),
    opened = num(v[6], 0), swept = num(v[7], 0), ru = num(v[8], -1), cap = num(v[9], 1),
    budget = num(v[10], 1), ttl = num(v[11], 600000), pv = v[12] or '', mig = v[13] == '1', rw = num(v[14], 0),
    tu = num(v[15], 0), pins = num(v[16], 0), ctl = num(v[17], 0),
  }
end

-- The session's meta, or nil when it does not exist.
local function meta_get()
  return meta_parse(redis.call('HMGET', M, unpack(META_FIELDS)))
end

-- The meta once every key's type is checked (wrong_type), or the answer a
-- script gives instead: {'corrupt', key} (another program's key) or
-- {'unknown'} (no such session).
local function checked_meta()
  local bad = wrong_type()
  if bad then
    return nil, { 'corrupt', bad }
  end
  local m = meta_get()
  if not m then
    return nil, { 'unknown' }
  end
  return m, nil
end

-- meta_get under pcall: the meta (or nil), and true when the meta key is
-- of another type.
local function meta_read()
  local v = redis.pcall('HMGET', M, unpack(META_FIELDS))
  if failed(v) then
    return nil, true
  end
  return meta_parse(v), false
end

local function meta_put(m)
  redis.call('HSET', M, 'head', fmt(m.head), 'oldest', fmt(m.oldest), 'bytes', fmt(m.bytes),
    'opened', fmt(m.opened), 'swept', fmt(m.swept))
  if m.ru >= 0 then
    redis.call('HSET', M, 'ru', fmt(m.ru))
  end
end

-- Whether a caller (ARGV flag '1' + owner, or '0') may see the session.
local function owner_ok(m, has_owner, owner)
  if has_owner == '1' then
    return m.ow == owner
  end
  return m.ow == false or m.ow == nil
end

local function rec_parse(v)
  if not v then
    return nil
  end
  local f = {}
  for n in string.gmatch(v, '%d+') do
    f[#f + 1] = tonumber(n)
  end
  return { first = f[1], high = f[2], published = f[3], delivered = f[4], dindex = f[5], ended = f[6] }
end

local function rec_get(id)
  return rec_parse(redis.call('HGET', S, fmt(id)))
end

local function rec_str(r)
  return string.format('%d %d %d %d %d %d', r.first, r.high, r.published, r.delivered, r.dindex, r.ended)
end

-- Gives every key the idle timeout as its TTL, from now; a pinned session's
-- keys keep none (pin.lua).
local function touch(m)
  if m.pins > 0 then
    return
  end
  for i = 1, 7 do
    redis.call('PEXPIRE', KEYS[i], m.ttl)
  end
end

local function announce(what)
  redis.call('PUBLISH', string.sub(M, 1, -2) .. 'n', what)
end

-- A log entry's fields as a table.
local function fields(f)
  local e = {}
  for k = 1, #f, 2 do
    e[f[k]] = f[k + 1]
  end
  return e
end

-- The fields of log entry `seq` as a table, or nil when it is not there.
local function entry_get(seq)
  local r = redis.call('XRANGE', L, fmt(seq) .. '-0', fmt(seq) .. '-0')
  if #r == 0 then
    return nil
  end
  return fields(r[1][2])
end

-- entry_get under pcall: the fields (or nil), and true when the log is of
-- another type.
local function entry_read(seq)
  local r = redis.pcall('XRANGE', L, fmt(seq) .. '-0', fmt(seq) .. '-0')
  if failed(r) then
    return nil, true
  end
  if #r == 0 then
    return nil, false
  end
  return fields(r[1][2]), false
end

-- The lengths list (B) holds the payload length of every retained event, so
-- that an eviction by bytes knows what it frees without reading the log.
-- Its elements are '<first>-<last>:<runs>', the lengths of events
-- first..last in order, run-length coded ('<len>' or '<len>*<count>',
-- separated by spaces), at most RUNS_PER_ELEMENT runs each: an append
-- pushes one element (a batch of equal lengths is one run), or one per 64
-- runs, not one per event. Its front element starts at the window's oldest
-- event (a partly evicted one is rewritten, at the cost of its runs), and
-- its back one ends at the head.
local RUNS_PER_ELEMENT = 64

local function run_str(len, count)
  return count == 1 and fmt(len) or fmt(len) .. '*' .. fmt(count)
end

-- Pushes the lengths lens[from..to] of the events from `first` on the
-- list's back (nothing when from > to).
local function lengths_push(first, lens, from, to)
  local els, parts, efirst, seq = {}, {}, first, first
  local function close()
    els[#els + 1] = fmt(efirst) .. '-' .. fmt(seq - 1) .. ':' .. table.concat(parts, ' ')
    parts, efirst = {}, seq
  end
  local j = from
  while j <= to do
    local len, count = lens[j], 1
    while j + count <= to and lens[j + count] == len do
      count = count + 1
    end
    parts[#parts + 1] = run_str(len, count)
    seq, j = seq + count, j + count
    if #parts == RUNS_PER_ELEMENT then
      close()
    end
  end
  if #parts > 0 then
    close()
  end
  -- In chunks: Lua's unpack takes a few thousand values at most.
  for k = 1, #els, 1000 do
    redis.call('RPUSH', B, unpack(els, k, math.min(k + 999, #els)))
  end
end

-- Whether the lengths list (`blen` elements) covers the window exactly at
-- its ends: its front starts at the oldest event and its back ends at the
-- head. A list written by an older release (one number per event), or none,
-- does not. Also answers the front element, read.
local function lengths_in_step(m, blen)
  if m.head < m.oldest then
    return blen == 0, nil
  end
  if blen == 0 then
    return false, nil
  end
  local front = redis.call('LINDEX', B, 0)
  local back = blen == 1 and front or redis.call('LINDEX', B, -1)
  return tonumber(string.match(front, '^(%d+)%-')) == m.oldest and
      tonumber(string.match(back, '^%d+%-(%d+):')) == m.head, front
end

-- Writes the lengths list again from the log (entries that are not there
-- count 0: the script never fails half-way, and Redis does not undo it).
local function lengths_rebuild(m)
  redis.call('DEL', B)
  local seq, lens = m.oldest, {}
  local function flush()
    lengths_push(seq - #lens, lens, 1, #lens)
    lens = {}
  end
  local function add(len)
    lens[#lens + 1] = len
    seq = seq + 1
    if #lens == 1000 then
      flush()
    end
  end
  local from = fmt(m.oldest) .. '-0'
  while seq <= m.head do
    local page = redis.call('XRANGE', L, from, fmt(m.head) .. '-0', 'COUNT', 1000)
    if #page == 0 then
      break
    end
    for _, it in ipairs(page) do
      local at = tonumber(string.match(it[1], '^(%d+)%-0$'))
      if at and at >= seq then
        while seq < at do
          add(0)
        end
        local f, len = it[2], 0
        for k = 1, #f, 2 do
          if f[k] == 'p' then
            len = #f[k + 1]
          end
        end
        add(len)
      end
    end
    from = '(' .. page[#page][1]
  end
  while seq <= m.head do
    add(0)
  end
  flush()
  -- A key made again: its TTL too (unless the session is pinned).
  if m.pins == 0 and m.head >= m.oldest then
    redis.call('PEXPIRE', B, m.ttl)
  end
end

-- The lengths of the retained events in order from the oldest, read from
-- the list's front as an eviction needs them: next() gives the next one
-- (0 past the list's end), and finish(kept) writes back what is left of
-- the elements read, the first `kept` seq being the new front. `first` is
-- the front element when the caller has read it already (nil: not read).
local function lengths_front(first)
  local c = { e = -1, lens = {}, counts = {}, i = 1, left = 0, len = 0, last = 0, dry = false }
  function c.next()
    while c.left == 0 do
      if c.i <= #c.lens then
        c.len, c.left, c.i = c.lens[c.i], c.counts[c.i], c.i + 1
      else
        local v = c.e < 0 and first or not c.dry and redis.call('LINDEX', B, c.e + 1)
        if not v then
          -- Past the list's end (a list out of step in its middle).
          c.dry = true
          return 0
        end
        c.e = c.e + 1
        local last, runs = string.match(v, '^%d+%-(%d+):(.*)$')
        c.last, c.lens, c.counts, c.i = tonumber(last) or 0, {}, {}, 1
        for len, count in string.gmatch(runs or '', '(%d+)%*?(%d*)') do
          c.lens[#c.lens + 1] = tonumber(len)
          c.counts[#c.counts + 1] = tonumber(count) or 1
        end
      end
    end
    c.left = c.left - 1
    return c.len
  end
  function c.finish(kept)
    if c.e < 0 then
      return
    end
    if c.left > 0 or c.i <= #c.lens then
      -- Element e is partly evicted: the rest of it stays, as the front.
      local parts = {}
      if c.left > 0 then
        parts[1] = run_str(c.len, c.left)
      end
      for j = c.i, #c.lens do
        parts[#parts + 1] = run_str(c.lens[j], c.counts[j])
      end
      redis.call('LSET', B, c.e, fmt(kept) .. '-' .. fmt(c.last) .. ':' .. table.concat(parts, ' '))
      if c.e > 0 then
        redis.call('LTRIM', B, c.e, -1)
      end
    else
      redis.call('LTRIM', B, c.e + 1, -1)
    end
  end
  return c
end

-- Writes `n` events, held in `ev` as consecutive triples (stream, nonce,
-- payload) from index `base` (validated by the caller: their streams'
-- records are in `recs`, not ended, each payload within the budget;
-- `blen`, the lengths list's length, read by the caller), at the next seqs,
-- trimming the window by events and by bytes exactly as the ring's
-- Producer::publish evicts; each event records `origin` (the writing node,
-- '' or nil for none). Updates `m` and the records (the caller stores `m`).
-- Returns the first seq written. The loop is the store's hot path: a
-- batch's events cost one XADD each and little else.
local function write_events(m, recs, ev, base, n, blen, origin)
  local first_seq = m.head + 1
  -- This batch's payload lengths, in order.
  local added = {}
  local in_step, first = lengths_in_step(m, blen)
  if not in_step then
    lengths_rebuild(m)
    first = nil
  end
  local front = lengths_front(first)
  -- The length of retained event `seq`, the oldest: this batch's own from
  -- `added`, an older one from the lengths list's front.
  local function len_of(seq)
    if seq >= first_seq then
      return added[seq - first_seq + 1]
    end
    return front.next()
  end
  local call, format = redis.call, string.format
  local cap, budget = m.cap, m.budget
  local head, oldest, bytes = m.head, m.oldest, m.bytes
  local tagged = origin and origin ~= ''
  local last_sid, r
  for k = 0, n - 1 do
    local at = base + 3 * k
    local sid, nonce, payload = ev[at], ev[at + 1], ev[at + 2]
    local len = #payload
    local seq = head + 1
    -- Bounded by the head: whatever the byte count says, an empty window
    -- has nothing left to evict (the script never loops).
    if seq - oldest >= cap and oldest <= head then
      bytes = bytes - len_of(oldest)
      oldest = oldest + 1
    end
    while bytes + len > budget and oldest <= head do
      bytes = bytes - len_of(oldest)
      oldest = oldest + 1
    end
    if oldest > head then
      bytes = 0
    end
    if sid ~= last_sid then
      r, last_sid = recs[sid], sid
    end
    local prev = r.high
    local index = r.published + 1
    if prev == 0 then
      r.first = seq
    end
    r.published = index
    r.high = seq
    if tagged then
      call('XADD', L, format('%d-0', seq), 's', sid, 'i', format('%d', index), 'v', format('%d', prev), 'n', nonce,
        'o', origin, 'p', payload)
    else
      call('XADD', L, format('%d-0', seq), 's', sid, 'i', format('%d', index), 'v', format('%d', prev), 'n', nonce,
        'p', payload)
    end
    added[k + 1] = len
    bytes = bytes + len
    head = seq
  end
  local old_oldest = m.oldest
  m.head, m.oldest, m.bytes = head, oldest, bytes
  for sid, r in pairs(recs) do
    redis.call('HSET', S, sid, rec_str(r))
  end
  -- This batch's retained events (at least its last: an event within the
  -- budget is never evicted by its own append), pushed before the front is
  -- cut, so that the list is never left empty (a new key would lack its TTL).
  local kept = math.max(oldest, first_seq)
  lengths_push(kept, added, kept - first_seq + 1, n)
  if oldest > old_oldest then
    front.finish(oldest)
    redis.call('XTRIM', L, 'MINID', fmt(oldest) .. '-0')
  end
  return first_seq
end

-- Redis's clock in milliseconds (every node reads the same one).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Refreshes the keys' idle TTL (touch) when `force`, or when the last
-- refresh (meta `tu`, Redis's clock) is older than an eighth of the TTL:
-- the hot scripts pay one TIME a call instead of seven PEXPIREs (and a
-- pinned session's nothing: its keys keep no TTL while pinned). A script
-- forces it after a write that may have created a key (a key created since
-- the last refresh has no TTL yet).
local function touch_due(m, force)
  if m.pins > 0 then
    -- Pinned: no key has a TTL, nor gets one (pin.lua).
    return
  end
  local now = now_ms()
  if force or now - m.tu >= m.ttl / 8 then
    -- These scripts did not ask every key's TYPE: a key of another type
    -- (another program's) keeps its TTL.
    for i = 1, 7 do
      if redis.call('TYPE', KEYS[i])['ok'] == KEY_TYPES[i] then
        redis.call('PEXPIRE', KEYS[i], m.ttl)
      end
    end
    m.tu = now
    redis.call('HSET', M, 'tu', fmt(now))
  end
end

-- Records that a node saw `seen` as this session's head: above the store's
-- head, the seqs between were lost (a failover); kept as rw.
local function note_seen(m, seen)
  if seen > m.head and seen > m.rw then
    m.rw = seen
    redis.call('HSET', M, 'rw', fmt(seen))
  end
end
