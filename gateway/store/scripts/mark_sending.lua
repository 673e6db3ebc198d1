-- Claim the right to send a reply: only a 'pending' one may be sent, and it is
-- 'sending' from now on, so a worker that dies mid-send never causes a second send.
-- KEYS: lease, reply   ARGV: token
-- Errors: LEASE_LOST.   Returns {status found, the reply's fields (flat)}.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('LEASE_LOST') end
local status = redis.call('HGET', KEYS[2], 'status') or ''
if status == 'pending' then redis.call('HSET', KEYS[2], 'status', 'sending') end
return {status, redis.call('HGETALL', KEYS[2])}
