-- Wake parked threads that are due: each gets a fresh entry in the ready stream (it stayed
-- scheduled while parked). Safe to run from every worker: a thread is woken once.
-- KEYS: parked, ready   ARGV: now ms, limit
-- Returns the woken thread ids.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, thread in ipairs(due) do
  redis.call('ZREM', KEYS[1], thread)
  redis.call('XADD', KEYS[2], '*', 't', thread)
end
return due
