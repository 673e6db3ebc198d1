-- uses: emit, release
-- Record a delivery's outcome (sent / failed / uncertain), remember which thread each
-- provider id belongs to (for status callbacks), publish, release the thread if idle.
-- KEYS: lease, reply, outbox, events, session_events, inbox, sched, ready, sent keys…
-- ARGV: token, message id, status, provider ids json, events json, maxlen, at,
--       thread id, session id, ready entry id, group, sent-key ttl, session ttl
-- Returns {released (1|0), event ids}.
redis.call('HSET', KEYS[2], 'status', ARGV[3], 'provider_ids', ARGV[4], 'done_at', ARGV[7])
redis.call('LREM', KEYS[3], 0, ARGV[2])
for i = 9, #KEYS do
  redis.call('SET', KEYS[i], cjson.encode({ARGV[8], ARGV[2], ARGV[9]}), 'EX', ARGV[12])
end
local ids = emit(KEYS[4], ARGV[6], ARGV[7], ARGV[8], ARGV[9], KEYS[5], cjson.decode(ARGV[5]))
keep(KEYS[5], ARGV[13])
local released = release_if_idle(KEYS[6], KEYS[3], KEYS[7], KEYS[1], KEYS[8], ARGV[11],
  ARGV[10], ARGV[1])
return {released, ids}
