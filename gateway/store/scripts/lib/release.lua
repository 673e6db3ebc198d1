-- release_if_idle(inbox, outbox, sched, lease, ready, group, entry, token) -> 1 | 0
-- When the thread has nothing left (empty inbox and outbox): clear its scheduled flag,
-- acknowledge its ready entry and drop the lease if it is still ours, in one step, so a
-- message that arrives later schedules the thread again.
local function release_if_idle(inbox, outbox, sched, lease, ready, group, entry, token)
  if redis.call('LLEN', inbox) == 0 and redis.call('LLEN', outbox) == 0 then
    redis.call('DEL', sched)
    if entry ~= '' then redis.call('XACK', ready, group, entry) end
    if redis.call('GET', lease) == token then redis.call('DEL', lease) end
    return 1
  end
  return 0
end
