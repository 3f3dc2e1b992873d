-- fed_claim: a worker claims one site of a federated job's generation (workers/fed_io.c).
-- KEYS[1] gantry:fed:<job>:<gen>:sites (site index -> worker id)
-- ARGV[1] the hash's TTL in s  ARGV[2] the worker id  ARGV[3 ..] candidate site indexes, in order
-- Result: the site this worker holds already, else the first candidate it could claim
-- (the hash's TTL renewed); -1 when every candidate is held by another worker.
for i = 3, #ARGV do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[2] then return tonumber(ARGV[i]) end
end
for i = 3, #ARGV do
  if redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[2]) == 1 then
    redis.call('EXPIRE', KEYS[1], ARGV[1])
    return tonumber(ARGV[i])
  end
end
return -1
