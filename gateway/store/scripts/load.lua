-- Take (or keep) a thread's lease and read the thread whole, in one round trip.
-- KEYS: lease, state, history, inbox, outbox   ARGV: token, lease ms
-- Returns false when another worker holds the lease, else
-- {state (flat HGETALL), history, inbox head or '', outbox}.
local owner = redis.call('GET', KEYS[1])
if owner and owner ~= ARGV[1] then return false end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {redis.call('HGETALL', KEYS[2]), redis.call('LRANGE', KEYS[3], 0, -1),
        redis.call('LINDEX', KEYS[4], 0) or '', redis.call('LRANGE', KEYS[5], 0, -1)}
