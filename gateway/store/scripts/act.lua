-- uses: emit, state
-- An action on a thread outside a turn (support, the sweeper): preconditions on the
-- thread's state, state changes, index updates, events, and optionally a reply queued
-- for the workers to deliver (the thread is scheduled if it was not; a parked thread is
-- woken now: its message still waits for the model, the reply does not).
-- KEYS: state, lease, outbox, sched, ready, events, session_events, sessions_open,
--       handoffs_open, reply, handoffs_waiting, parked
-- ARGV[1]: json {require, idle, state, session_open, handoff_open, waiting_open, events,
--          reply, now_ms, at, thread_id, session_id, events_maxlen, reply_ttl,
--          session_ttl}
-- Errors: BUSY (idle required and a worker holds the lease),
--         PRECONDITION <field>=<actual> (the state changed since the action was decided).
-- Returns the event ids.
local p = cjson.decode(ARGV[1])
if p['idle'] and redis.call('EXISTS', KEYS[2]) == 1 then return redis.error_reply('BUSY') end
for field, expected in pairs(p['require']) do
  local actual = redis.call('HGET', KEYS[1], field) or ''
  if actual ~= expected then
    return redis.error_reply('PRECONDITION ' .. field .. '=' .. actual)
  end
end
apply_state(KEYS[1], p['state'])
apply_index(KEYS[8], p['session_open'], p['thread_id'], p['now_ms'])
apply_index(KEYS[9], p['handoff_open'], p['thread_id'], p['now_ms'])
apply_index(KEYS[11], p['waiting_open'], p['thread_id'], p['now_ms'])
if p['reply'] ~= cjson.null then
  local r = p['reply']
  redis.call('HSET', KEYS[10], 'status', 'pending', 'text', r['text'], 'to', r['to'],
    'channel', r['channel'], 'session_id', p['session_id'], 'at', p['at'],
    'author', r['author'], 'from', r['from'] or '')
  redis.call('EXPIRE', KEYS[10], p['reply_ttl'])
  redis.call('RPUSH', KEYS[3], r['id'])
  if redis.call('SET', KEYS[4], '1', 'NX') then
    redis.call('XADD', KEYS[5], '*', 't', p['thread_id'])
  elseif redis.call('ZSCORE', KEYS[12], p['thread_id']) then
    redis.call('ZADD', KEYS[12], p['now_ms'], p['thread_id'])
  end
end
local ids = emit(KEYS[6], p['events_maxlen'], p['at'], p['thread_id'], p['session_id'],
  KEYS[7], p['events'])
keep(KEYS[7], p['session_ttl'])
return ids
