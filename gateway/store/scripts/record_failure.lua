-- uses: emit
-- Publish a failed analysis run and keep its record (newest first, capped).
-- A final failure (no retry follows) counts in the psychologist's stats.
-- KEYS: failures, events, stats
-- ARGV[1]: json {record, at, thread_id, maxlen, kept, events, ttl}
-- Returns the event ids.
local p = cjson.decode(ARGV[1])
local ids = emit(KEYS[2], p['maxlen'], p['at'], p['thread_id'], '', '', p['events'])
p['record']['event_id'] = ids[1]
redis.call('LPUSH', KEYS[1], cjson.encode(p['record']))
redis.call('LTRIM', KEYS[1], 0, p['kept'] - 1)
keep(KEYS[1], p['ttl'])
if p['record']['final'] then redis.call('HINCRBY', KEYS[3], 'failed', 1) end
return ids
