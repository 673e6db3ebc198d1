-- Let go of a parked thread (its head message waits for the model): acknowledge our
-- ready entry and drop our lease, but keep it scheduled — new messages queue behind the
-- parked one, and `unpark` wakes the thread when it is due.
-- KEYS: lease, ready, parked   ARGV: token, group, entry id, thread id, due ms
-- Returns 1 (0 when the lease was no longer ours: nothing done).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[4])
if ARGV[3] ~= '' then redis.call('XACK', KEYS[2], ARGV[2], ARGV[3]) end
redis.call('DEL', KEYS[1])
return 1
