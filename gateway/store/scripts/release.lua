-- uses: release
-- Release the thread if it has nothing left to do.
-- KEYS: inbox, outbox, sched, lease, ready   ARGV: group, entry id, token
-- Returns 1 when released, 0 when work is left.
return release_if_idle(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2],
  ARGV[3])
