-- uses: emit
-- Store an analysis as THE current one of its session, if the current pointer is what
-- the caller saw: '' for a first analysis (SET NX semantics), the old id for a
-- reanalysis (which is then marked superseded, never deleted, and its hypotheses leave
-- the current indexes). Publishes the hypotheses' and the analysis' events.
-- KEYS: current, analyses, analysis, insights, thread hypotheses, events, old analysis
--       (or ''), stats, then one hash per new hypothesis
-- ARGV[1]: json {expected, id, analysis: [k, v…], hypotheses: [[id, [k, v…]]…], score,
--          at, thread_id, maxlen, events: [[type, data]…], ttl (seconds)}
-- Everything it writes expires after ttl; the indexes drop what is older.
-- Returns {stored (1|0), the current id found, event ids}.
local p = cjson.decode(ARGV[1])
local current = redis.call('GET', KEYS[1]) or ''
if current ~= p['expected'] then return {0, current, {}} end
if current ~= '' then
  redis.call('HSET', KEYS[7], 'status', 'superseded', 'superseded_at', p['at'],
    'superseded_by', p['id'])
  local old = cjson.decode(redis.call('HGET', KEYS[7], 'hypothesis_ids') or '[]')
  for _, h in ipairs(old) do
    redis.call('ZREM', KEYS[4], h)
    redis.call('ZREM', KEYS[5], h)
  end
end
redis.call('HSET', KEYS[3], unpack(p['analysis']))
redis.call('RPUSH', KEYS[2], p['id'])
redis.call('SET', KEYS[1], p['id'])
redis.call('HINCRBY', KEYS[8], 'completed', 1)
for i, h in ipairs(p['hypotheses']) do
  redis.call('HSET', KEYS[8 + i], unpack(h[2]))
  redis.call('ZADD', KEYS[4], p['score'], h[1])
  redis.call('ZADD', KEYS[5], p['score'], h[1])
end
local ids = emit(KEYS[6], p['maxlen'], p['at'], p['thread_id'], '', '', p['events'])
for i, k in ipairs(KEYS) do
  if i ~= 4 and i ~= 5 and i ~= 6 and i ~= 8 then keep(k, p['ttl']) end
end
local oldest = p['score'] - p['ttl'] * 1000
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', oldest)
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', oldest)
keep(KEYS[5], p['ttl'])
return {1, current, ids}
