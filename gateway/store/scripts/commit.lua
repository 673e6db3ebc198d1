-- uses: emit, state, release
-- Commit a turn, fenced by the lease: pop the message (unless it is parked), write state
-- and history, queue the replies, publish the events, update the indexes (open sessions,
-- open handoffs, queued requests for a person); release the thread when nothing is left.
-- A parked message stays at the head and the thread is woken at `park_until_ms`.
-- KEYS: lease, inbox, state, history, outbox, events, session_events, sched, ready,
--       sessions_open, handoffs_open, handoffs_waiting, parked, then one per reply
-- ARGV: token, message id, payload json {state, history, events, replies: [{id, text,
--       to, channel, from, author}], session_open, handoff_open, waiting_open,
--       park_until_ms, now_ms}, history cap, events maxlen, at, thread id, session id,
--       ready entry id, group, reply ttl, thread ttl, session ttl (seconds; 0: none)
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
local p = cjson.decode(ARGV[3])
local parked = p['park_until_ms'] ~= cjson.null
if parked then
  redis.call('ZADD', KEYS[13], p['park_until_ms'], ARGV[7])
else
  redis.call('LPOP', KEYS[2])
end
apply_state(KEYS[3], p['state'])
apply_index(KEYS[10], p['session_open'], ARGV[7], p['now_ms'])
apply_index(KEYS[11], p['handoff_open'], ARGV[7], p['now_ms'])
apply_index(KEYS[12], p['waiting_open'], ARGV[7], p['now_ms'])
if #p['history'] > 0 then
  redis.call('RPUSH', KEYS[4], unpack(p['history']))
  redis.call('LTRIM', KEYS[4], -tonumber(ARGV[4]), -1)
end
for i, r in ipairs(p['replies']) do
  redis.call('HSET', KEYS[13 + i], 'status', 'pending', 'text', r['text'], 'to', r['to'],
    'channel', r['channel'], 'session_id', ARGV[8], 'at', ARGV[6], 'author', r['author'],
    'from', r['from'])
  redis.call('EXPIRE', KEYS[13 + i], ARGV[11])
  redis.call('RPUSH', KEYS[5], r['id'])
end
local ids = emit(KEYS[6], ARGV[5], ARGV[6], ARGV[7], ARGV[8], KEYS[7], p['events'])
keep(KEYS[7], ARGV[13])
for _, k in ipairs({KEYS[2], KEYS[3], KEYS[4], KEYS[5]}) do keep(k, ARGV[12]) end
local released = 0
if #p['replies'] == 0 and not parked then
  released = release_if_idle(KEYS[2], KEYS[5], KEYS[8], KEYS[1], KEYS[9], ARGV[10],
    ARGV[9], ARGV[1])
end
return {released, ids}
