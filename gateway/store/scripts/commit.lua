-- uses: emit, state, release
-- Commit a turn, fenced by the lease: pop the message, write state and history, queue
-- the reply, publish the events, update the open-session/handoff indexes; release the
-- thread when there is nothing left to do.
-- KEYS: lease, inbox, state, history, outbox, reply, events, session_events, sched,
--       ready, sessions_open, handoffs_open
-- ARGV: token, message id, payload json {state, history, events, reply, to, channel,
--       from, session_open, handoff_open, now_ms}, history cap, events maxlen, at,
--       thread id, session id, ready entry id, group, reply ttl
-- Errors: LEASE_LOST (another worker owns the thread), EMPTY_INBOX, HEAD_MISMATCH.
-- Returns {released (1|0), event ids}.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('LEASE_LOST') end
local head = redis.call('LINDEX', KEYS[2], 0)
if not head then return redis.error_reply('EMPTY_INBOX') end
local stored = cjson.decode(head)
local message = stored['message'] or stored
if message['provider_message_id'] ~= ARGV[2] then
  return redis.error_reply('HEAD_MISMATCH')
end
redis.call('LPOP', KEYS[2])
local p = cjson.decode(ARGV[3])
apply_state(KEYS[3], p['state'])
apply_index(KEYS[11], p['session_open'], ARGV[7], p['now_ms'])
apply_index(KEYS[12], p['handoff_open'], ARGV[7], p['now_ms'])
if #p['history'] > 0 then
  redis.call('RPUSH', KEYS[4], unpack(p['history']))
  redis.call('LTRIM', KEYS[4], -tonumber(ARGV[4]), -1)
end
if p['reply'] ~= cjson.null then
  redis.call('HSET', KEYS[6], 'status', 'pending', 'text', p['reply'], 'to', p['to'],
    'channel', p['channel'], 'session_id', ARGV[8], 'at', ARGV[6], 'author', 'bot',
    'from', p['from'])
  redis.call('EXPIRE', KEYS[6], ARGV[11])
  redis.call('RPUSH', KEYS[5], ARGV[2])
end
local ids = emit(KEYS[7], ARGV[5], ARGV[6], ARGV[7], ARGV[8], KEYS[8], p['events'])
local released = 0
if p['reply'] == cjson.null then
  released = release_if_idle(KEYS[2], KEYS[5], KEYS[9], KEYS[1], KEYS[10], ARGV[10],
    ARGV[9], ARGV[1])
end
return {released, ids}
