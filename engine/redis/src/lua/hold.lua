-- A hold of the session: what one node (or one connection of a node) of
-- the cluster does for it at a time, a field of its meta (ARGV[2]: 'sa', the
-- standalone stream's, "<node>:<generation>"; 'h:<name>', an application's,
-- "<node>"), gone with the session, renewed by nobody: it is valid while
-- its holder's node's lease is (the caller checks that lease). ARGV[1]
-- 'take': holder ARGV[3] takes it when nobody holds it, when it holds it
-- already, or when it is still ARGV[4] (a holder the caller found gone: its
-- node's lease expired, or a connection of the caller's own node that
-- ended; '' for none). Answers {'ok'}, {'busy', holder} or {'unknown'}.
-- ARGV[1] 'drop': lets go of it if ARGV[3] holds it; answers {'ok'} or
-- {'unknown'}.
local m, refused = checked_meta()
if refused then
  return refused
end
local field = ARGV[2]
local now = redis.call('HGET', M, field)
if ARGV[1] == 'take' then
  if now and now ~= ARGV[3] and now ~= ARGV[4] then
    return { 'busy', now }
  end
  redis.call('HSET', M, field, ARGV[3])
  return { 'ok' }
end
if now == ARGV[3] then
  redis.call('HDEL', M, field)
end
return { 'ok' }
