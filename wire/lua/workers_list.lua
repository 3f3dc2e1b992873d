-- workers_list: every registered worker's hash, for GET /v1/workers (server/bus.c).
-- KEYS[1] gantry:workers  ARGV[1] the worker hash prefix (gantry:worker:): the hashes are
-- named by the set's members, so they cannot be declared up front.
-- Result: a flat array id, {field, value, ...}, id, ... of the workers whose hash exists
-- (a worker whose heartbeat expired is left out); empty when there is none.
local ids = redis.call('SMEMBERS', KEYS[1])
local out = {}
for _, id in ipairs(ids) do
  local h = redis.call('HGETALL', ARGV[1] .. id)
  if #h > 0 then
    out[#out + 1] = id
    out[#out + 1] = h
  end
end
return out
