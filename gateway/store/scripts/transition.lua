-- uses: emit
-- Move a hypothesis out of 'proposed' (and only from there), publishing its events.
-- KEYS: hypothesis, events   ARGV[1]: json {fields: [k, v…], at, maxlen, events}
-- Returns {'missing', ''} | {'conflict', current status} | {'ok', event ids}.
local p = cjson.decode(ARGV[1])
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return {'missing', ''} end
if status ~= 'proposed' then return {'conflict', status} end
redis.call('HSET', KEYS[1], unpack(p['fields']))
local thread_id = redis.call('HGET', KEYS[1], 'thread_id') or ''
return {'ok', emit(KEYS[2], p['maxlen'], p['at'], thread_id, '', '', p['events'])}
