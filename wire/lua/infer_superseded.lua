-- infer_superseded: whether an inference replica steps aside (workers/exec_infer.c).
-- KEYS[1] gantry:retry:<job>:<attempt> (its generation was requeued)
-- KEYS[2] gantry:infer:drain:<job>:<worker> (the autoscaler drains this replica; deleted here)
-- Result: the number of those keys that existed, 0..2; 0: keep serving.
local n = redis.call('EXISTS', KEYS[1], KEYS[2])
redis.call('DEL', KEYS[2])
return n
