-- Keep a refused webhook delivery in the raw stream, with its own count limit: the ids
-- of refused entries are listed, and past `max` the oldest are deleted from the stream,
-- so unsigned traffic can never push out (or outgrow) the accepted deliveries.
-- KEYS: raw, refused ids   ARGV: meta json, body (a prefix), raw maxlen, max refused
-- Returns the new entry's id.
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 'meta', ARGV[1],
  'body', ARGV[2])
redis.call('RPUSH', KEYS[2], id)
local extra = redis.call('LLEN', KEYS[2]) - tonumber(ARGV[4])
if extra > 0 then
  local old = redis.call('LPOP', KEYS[2], extra)
  redis.call('XDEL', KEYS[1], unpack(old))
end
return id
