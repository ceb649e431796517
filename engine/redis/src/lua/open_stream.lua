-- Opens a stream; reclaims the records of ended streams whose events all
-- left the window, exactly as the ring's Producer::open_stream does (when
-- the directory has doubled since the last sweep; fully delivered ones
-- leave a tombstone, the newest 256 kept; of the others the newest 256
-- records stay, older ones fold their high-water seq into `ru`).
-- ARGV: the head the calling node's replica has (see note_seen). Answers
-- {'ok', id, head} or {'unknown'}.
local m, refused = checked_meta()
if refused then
  return refused
end
note_seen(m, tonumber(ARGV[1] or '0') or 0)
local len = redis.call('HLEN', S)
if len >= 2 * math.max(m.swept, 8) then
  local all = redis.call('HGETALL', S)
  local undelivered = {}
  local reclaimed = {}
  for k = 1, #all, 2 do
    local id = tonumber(all[k])
    local r = rec_parse(all[k + 1])
    if r.ended == 1 and r.high < m.oldest then
      if r.delivered < r.high then
        undelivered[#undelivered + 1] = { id, r.high }
      else
        reclaimed[#reclaimed + 1] = { id, r.first, r.high }
        redis.call('HDEL', S, all[k])
      end
    end
  end
  local by_id = function(a, b) return a[1] < b[1] end
  table.sort(reclaimed, by_id)
  for _, t in ipairs(reclaimed) do
    redis.call('HSET', T, fmt(t[1]), fmt(t[2]) .. ' ' .. fmt(t[3]))
    redis.call('RPUSH', O, fmt(t[1]))
  end
  while redis.call('LLEN', O) > KEEP_TOMBSTONES do
    redis.call('HDEL', T, redis.call('LPOP', O))
  end
  if #undelivered > KEEP_UNDELIVERED then
    table.sort(undelivered, by_id)
    for k = 1, #undelivered - KEEP_UNDELIVERED do
      redis.call('HDEL', S, fmt(undelivered[k][1]))
      if m.ru < 0 or undelivered[k][2] < m.ru then
        m.ru = undelivered[k][2]
      end
    end
  end
  m.swept = redis.call('HLEN', S)
end
m.opened = m.opened + 1
redis.call('HSET', S, fmt(m.opened), '0 0 0 0 0 0')
meta_put(m)
touch(m)
return { 'ok', m.opened, m.head }
