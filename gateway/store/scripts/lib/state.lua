-- apply_state(state_key, fields): HSET the fields; a field set to '' is deleted.
-- apply_index(key, flag, thread_id, score): flag true → ZADD, false → ZREM, nil → nothing.
local function apply_state(state_key, fields)
  local set, del = {}, {}
  for k, v in pairs(fields) do
    if v == '' then del[#del + 1] = k else set[#set + 1] = k; set[#set + 1] = v end
  end
  if #set > 0 then redis.call('HSET', state_key, unpack(set)) end
  if #del > 0 then redis.call('HDEL', state_key, unpack(del)) end
end
local function apply_index(key, flag, thread_id, score)
  if flag == true then redis.call('ZADD', key, score, thread_id)
  elseif flag == false then redis.call('ZREM', key, thread_id) end
end
