-- worker_beat: a worker's registration and heartbeat in one step (workers/main.c).
-- KEYS[1] gantry:worker:<id>  KEYS[2] gantry:workers
-- ARGV[1] info (JSON)  ARGV[2] hb (ms)  ARGV[3] util  ARGV[4] running job id ('' idle)
-- ARGV[5] the hash's TTL in ms  ARGV[6] '1' registers, '0' only refreshes  ARGV[7] the worker id
-- Result: 1 registered or refreshed; 0 fenced: a refresh found no hash (the scheduler
-- declared the worker dead, or Redis lost its data) and wrote nothing.
if ARGV[6] == '0' and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'info', ARGV[1], 'hb', ARGV[2], 'util', ARGV[3], 'running', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('SADD', KEYS[2], ARGV[7])
return 1
