-- The standalone stream's holder (meta field 'sa': "<node>:<generation>",
-- one connection in the whole cluster). ARGV[1] 'take': holder ARGV[2]
-- takes it when nobody holds it, when it holds it already, or when it is
-- still ARGV[3] (a holder the caller found gone: its node's lease expired,
-- or a connection of the caller's own node that ended; '' for none).
-- Answers {'ok'}, {'busy', holder} or {'unknown'}. ARGV[1] 'drop': lets go
-- of it if ARGV[2] holds it; answers {'ok'} or {'unknown'}. The holder is a
-- field of the meta, gone with the session; no node renews it.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
local m = meta_get()
if not m then
  return { 'unknown' }
end
local now = redis.call('HGET', M, 'sa')
if ARGV[1] == 'take' then
  if now and now ~= ARGV[2] and now ~= ARGV[3] then
    return { 'busy', now }
  end
  redis.call('HSET', M, 'sa', ARGV[2])
  return { 'ok' }
end
if now == ARGV[2] then
  redis.call('HDEL', M, 'sa')
end
return { 'ok' }
