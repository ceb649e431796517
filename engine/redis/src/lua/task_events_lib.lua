-- A task's event stream (SEP-2694; `task_events.rs`). KEYS[1]: the events,
-- a Redis stream whose entry of seq s has the id <s+1>-<emission ms> and
-- the event in field `b`; KEYS[2]: its meta, a hash: `next` (the seq the
-- next event gets), `oldest` (the oldest seq kept: what is kept is dense
-- from `oldest` to `next - 1`), `acked` (seqs below it are on a replica:
-- what readers serve), `bytes` (the kept events' length) and `ended`.

-- An integer as Redis takes it in an id (a Lua number concatenated is
-- written %.14g: 1e+14 from 10^14 on).
local function int(n)
  return string.format('%d', n)
end

local function meta_num(field)
  local v = redis.call('HGET', KEYS[2], field)
  if v then return tonumber(v) end
  return 0
end

-- Drops the oldest events while more than max_events are kept, more than
-- max_bytes, or the oldest was emitted before `cutoff` (ms; 0: no age
-- bound). Returns the new oldest seq and bytes.
local function trim(oldest, next, bytes, max_events, max_bytes, cutoff)
  local keep_from = oldest
  local done = false
  while not done and keep_from < next do
    if next - keep_from <= max_events and bytes <= max_bytes and cutoff <= 0 then break end
    local batch = redis.call('XRANGE', KEYS[1], int(keep_from + 1) .. '-0', '+', 'COUNT', 16)
    if #batch == 0 then
      keep_from, bytes = next, 0
      break
    end
    for _, e in ipairs(batch) do
      local id = e[1]
      local dash = string.find(id, '-', 1, true)
      local seq = tonumber(string.sub(id, 1, dash - 1)) - 1
      local ms = tonumber(string.sub(id, dash + 1))
      if next - seq > max_events or bytes > max_bytes or ms < cutoff then
        bytes = bytes - string.len(e[2][2])
        keep_from = seq + 1
      else
        done = true
        break
      end
    end
  end
  if keep_from > oldest then
    redis.call('XTRIM', KEYS[1], 'MINID', int(keep_from + 1) .. '-0')
  end
  return keep_from, bytes
end
