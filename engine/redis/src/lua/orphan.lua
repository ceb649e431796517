-- Answers a request, once: by its node (its response), or by a reaper
-- when its node died (its lease expired) before the request was answered
-- (a JSON-RPC error built by the caller). ARGV: stream, nonce, payload,
-- and for a request on a stream other requests share (the legacy
-- transport's) its token, with the meta field 'a:<token>' the mark that
-- it was answered.
-- On its own stream (no token) the request is answered if the stream is
-- still open: the answer is appended and the stream ended, in one step.
-- On a shared stream it is answered if the mark is absent and the stream
-- open: the answer is appended and the mark set, in one step; the stream
-- goes on. The mark is a field of the meta, so it lasts as long as the
-- session (the request's registration cannot outlive it); whoever forgets
-- the registration deletes the mark after (nodes.rs). Either way a node's
-- answer, a reaper's, and a reaper that dies half-way and the next one
-- never answer twice.
-- ARGV[5] 'mark' (shared only): the request was cancelled, it gets no
-- answer: only the mark is set, so that no reaper answers it later.
-- Answers {'ok', seq} (seq 0 for a mark), {'done'} (already answered, the
-- stream ended or gone), {'too_large'} (the answer exceeds the session's
-- byte budget) or {'unknown'}.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local shared = ARGV[4] ~= nil and ARGV[4] ~= ''
local m = meta_get()
if not m then
  return { 'unknown' }
end
local mark = shared and 'a:' .. ARGV[4]
if shared and redis.call('HEXISTS', M, mark) == 1 then
  return { 'done' }
end
local r = rec_get(tonumber(ARGV[1]))
if not r or r.ended == 1 then
  return { 'done' }
end
if shared and ARGV[5] == 'mark' then
  redis.call('HSET', M, mark, '1')
  return { 'ok', 0 }
end
local payload = ARGV[3]
if #payload > m.budget then
  return { 'too_large' }
end
local recs = {}
recs[ARGV[1]] = r
local seq = write_events(m, recs, { ARGV[1], ARGV[2], payload }, 1, 1, redis.call('LLEN', B))
if shared then
  redis.call('HSET', M, mark, '1')
  meta_put(m)
  touch(m)
  -- A head, as an append announces.
  announce(fmt(m.head) .. ':' .. fmt(m.ctl))
  return { 'ok', seq }
end
r.ended = 1
redis.call('HSET', S, ARGV[1], rec_str(r))
redis.call('XADD', L, fmt(m.head) .. '-*', 't', 'e', 's', ARGV[1])
redis.call('HINCRBY', M, 'ctl', 1)
meta_put(m)
touch(m)
-- Not a bare head: the stream ended too, a follower must read the log.
announce('end')
return { 'ok', seq }
