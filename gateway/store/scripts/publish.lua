-- uses: emit
-- Publish events outside a turn, in one atomic step.
-- KEYS: events, session_events (or '')   ARGV: maxlen, at, thread id, session id,
-- events json ([[type, data json]…]), session ttl.   Returns the event ids.
local ids = emit(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], KEYS[2], cjson.decode(ARGV[5]))
keep(KEYS[2], ARGV[6])
return ids
