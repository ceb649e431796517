-- Answers an orphaned request: its node died (its lease expired) before
-- the request's stream ended. If the stream is still open, appends the
-- answer (ARGV payload, a JSON-RPC error built by the caller) and ends the
-- stream, in one step, so that a reaper that dies half-way and the next one
-- never answer twice. ARGV: stream, nonce, payload.
-- Answers {'ok', seq}, {'done'} (already ended or gone), {'too_large'} (the
-- answer exceeds the session's byte budget) or {'unknown'}.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m then
  return { 'unknown' }
end
local r = rec_get(tonumber(ARGV[1]))
if not r or r.ended == 1 then
  return { 'done' }
end
local payload = ARGV[3]
if #payload > m.budget then
  return { 'too_large' }
end
local recs = {}
recs[ARGV[1]] = r
local seq = write_events(m, recs, { ARGV[1], ARGV[2], payload }, 1, 1, redis.call('LLEN', B))
r.ended = 1
redis.call('HSET', S, ARGV[1], rec_str(r))
redis.call('XADD', L, fmt(m.head) .. '-*', 't', 'e', 's', ARGV[1])
meta_put(m)
touch(m)
-- Not a bare head: the stream ended too, a follower must read the log.
announce('end')
return { 'ok', seq }
