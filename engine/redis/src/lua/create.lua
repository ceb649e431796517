-- Creates a session incarnation, replacing any under the same id (its
-- events, streams and tombstones go with it), with the standalone stream
-- (stream 1) opened. ARGV: ns, has_owner ('1'/'0'), owner, cap, budget, ttl,
-- protocol version.
local bad = wrong_type()
if bad then
  return { 'corrupt', bad }
end
redis.call('DEL', M, L, S, T, O, K, B)
redis.call('HSET', M, 'ns', ARGV[1], 'head', '0', 'oldest', '1', 'bytes', '0', 'opened', '1', 'swept', '0',
  'cap', ARGV[4], 'budget', ARGV[5], 'ttl', ARGV[6], 'pv', ARGV[7] or '')
if ARGV[2] == '1' then
  redis.call('HSET', M, 'ow', ARGV[3])
end
redis.call('HSET', S, '1', '0 0 0 0 0 0')
local m = meta_get()
touch(m)
announce('created')
return { 'ok' }
