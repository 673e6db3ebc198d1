-- Extend our lease on a thread.   KEYS: lease   ARGV: token, lease ms
-- Returns 1 when renewed, 0 when the lease is no longer ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
