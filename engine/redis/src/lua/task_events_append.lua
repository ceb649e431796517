-- Appends a batch of a task's events, written by the one node that runs the
-- task. ARGV: first (the batch's first seq), ack (seqs below it are on a
-- replica), ended ('1': no event follows), now (ms), expire_at (ms), the
-- bounds max_events, max_bytes, max_age_ms (0: none), then the events.
-- Idempotent: a retry skips what an earlier try wrote (seqs below `next`).
-- A stream that ended takes no more events (a reader sealed it because the
-- task's node was gone: one that comes back writes nothing more).
-- A batch that starts past `next` (the writer dropped events its queue could
-- not keep, or a failover lost a batch) drops what is kept before it: what
-- is kept stays dense, and a reader whose cursor falls in between is told
-- `events_gone`. Every write is announced on the task's channel. Returns
-- {next, oldest, acked}.
local first, ack = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = tonumber(ARGV[4])
local max_events, max_bytes, max_age = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local next, oldest, bytes = meta_num('next'), meta_num('oldest'), meta_num('bytes')
local n = #ARGV - 8
if meta_num('ended') == 1 then n = 0 end
if n > 0 and first > next then
  redis.call('DEL', KEYS[1])
  next, oldest, bytes = first, first, 0
end
for i = 1, n do
  local seq = first + i - 1
  if seq >= next then
    local b = ARGV[8 + i]
    redis.call('XADD', KEYS[1], int(seq + 1) .. '-' .. ARGV[4], 'b', b)
    bytes = bytes + string.len(b)
    next = seq + 1
  end
end
local cutoff = 0
if max_age > 0 then cutoff = now - max_age end
oldest, bytes = trim(oldest, next, bytes, max_events, max_bytes, cutoff)
local acked = math.max(meta_num('acked'), math.min(ack, next))
redis.call('HSET', KEYS[2], 'next', next, 'oldest', oldest, 'bytes', bytes, 'acked', acked)
if ARGV[3] == '1' then redis.call('HSET', KEYS[2], 'ended', 1) end
redis.call('PEXPIREAT', KEYS[2], ARGV[5])
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIREAT', KEYS[1], ARGV[5]) end
-- Readers on every node are told (the channel is `<prefix>task:{<id>}:n`;
-- a stream's end, or a seal, announces its acked like any write).
redis.call('PUBLISH', string.sub(KEYS[2], 1, -3) .. 'n', acked)
return {next, oldest, acked}
