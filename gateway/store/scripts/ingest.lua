-- Store deliveries (one or more, batched): their messages, status events, raw records.
-- KEYS: ready, raw, events, then per message: seen, inbox, sched
-- ARGV[1]: JSON {ttl, thread_ttl, raw_maxlen, events_maxlen, at, raws: [meta…],
--               messages: [[json, thread id]…], events: [[type, thread, session, data]…]}
-- ARGV[1 + i]: the body of raws[i]
-- Returns, per message, 1 when new, 0 when a duplicate (its seen marker existed).
local p = cjson.decode(ARGV[1])
local new = {}
for i, m in ipairs(p['messages']) do
  local k = 3 + (i - 1) * 3
  if redis.call('SET', KEYS[k + 1], '1', 'NX', 'EX', p['ttl']) then
    redis.call('RPUSH', KEYS[k + 2], m[1])
    if p['thread_ttl'] > 0 then redis.call('EXPIRE', KEYS[k + 2], p['thread_ttl']) end
    if redis.call('SET', KEYS[k + 3], '1', 'NX') then
      redis.call('XADD', KEYS[1], '*', 't', m[2])
    end
    new[i] = 1
  else
    new[i] = 0
  end
end
for _, e in ipairs(p['events']) do
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', p['events_maxlen'], '*', 'type', e[1],
    'at', p['at'], 'thread_id', e[2], 'session_id', e[3], 'data', e[4])
end
for i, meta in ipairs(p['raws']) do
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', p['raw_maxlen'], '*', 'meta', meta,
    'body', ARGV[1 + i])
end
return new
