-- keep(key, ttl): the key expires ttl seconds from now (ttl 0 or a '' key: nothing).
local function keep(key, ttl)
  if key ~= '' and tonumber(ttl) > 0 then redis.call('EXPIRE', key, ttl) end
end
-- emit(events_key, maxlen, at, thread_id, session_id, session_key, events) -> ids
-- Appends events ({type, data json} pairs) to the event stream (trimmed to ~maxlen) and,
-- when session_key is not '', their ids to that session's id list. Returns the ids.
local function emit(events_key, maxlen, at, thread_id, session_id, session_key, events)
  local ids = {}
  for _, ev in ipairs(events) do
    local id = redis.call('XADD', events_key, 'MAXLEN', '~', maxlen, '*',
      'type', ev[1], 'at', at, 'thread_id', thread_id, 'session_id', session_id,
      'data', ev[2])
    if session_key ~= '' then redis.call('RPUSH', session_key, id) end
    ids[#ids + 1] = id
  end
  return ids
end
