-- Hand an unfinished thread to another worker now (a draining worker's): drop our
-- lease, acknowledge our ready entry and add a fresh one (the thread stays scheduled),
-- so a live worker picks it up at once instead of after the claim timeout.
-- KEYS: lease, ready   ARGV: token, group, entry id, thread id
-- Returns 1 when requeued, 0 when the lease was no longer ours (nothing done).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if ARGV[3] ~= '' then redis.call('XACK', KEYS[2], ARGV[2], ARGV[3]) end
redis.call('XADD', KEYS[2], '*', 't', ARGV[4])
return 1
