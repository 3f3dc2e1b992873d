-- dispatch: puts one job on its workers, all of it or nothing (scheduler/dispatch.c).
-- KEYS[1] gantry:claim:<job>:<attempt>  KEYS[2] gantry:jobs  KEYS[3] gantry:events
-- KEYS[4] gantry:cancel:<job>  KEYS[5] gantry:rdv:<job>:<attempt>  KEYS[6] gantry:elastic
-- KEYS[7] gantry:infer:jobs  KEYS[8 ..] gantry:tasks:<worker> of each worker it goes to
-- ARGV[1] the task  ARGV[2] its gantry:jobs entry id  ARGV[3] the scheduler's group
-- ARGV[4] the "scheduled" event  ARGV[5] the streams' MAXLEN  ARGV[6] the first worker's id
-- ARGV[7] the job id  ARGV[8] an elastic gang's spec.workers.max ('0': not elastic)
-- ARGV[9] '1' for a job whose replicas the autoscaler manages (inference), else '0'
-- Result: 1 dispatched: the claim set (a week), the task on each list, a gang's size
--   (a gang: several workers, or elastic) in its rendezvous' field world, an elastic gang
--   in gantry:elastic, an inference job's task in gantry:infer:jobs, the event added;
--   0 a duplicate (the claim was already set: nothing but the XACK);
--   2 cancelled (gantry:cancel:<job> exists: nothing but the XACK).
-- The entry is XACKed in every case.
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('XACK', KEYS[2], ARGV[3], ARGV[2])
  return 2
end
if not redis.call('SET', KEYS[1], ARGV[6], 'NX', 'EX', 604800) then
  redis.call('XACK', KEYS[2], ARGV[3], ARGV[2])
  return 0
end
for i = 8, #KEYS do
  redis.call('LPUSH', KEYS[i], ARGV[1])
end
if #KEYS > 8 or ARGV[8] ~= '0' then
  redis.call('HSET', KEYS[5], 'world', #KEYS - 7)
  redis.call('PEXPIRE', KEYS[5], 86400000)
  if ARGV[8] ~= '0' then
    redis.call('HSET', KEYS[6], ARGV[7], ARGV[8])
  end
end
if ARGV[9] == '1' then
  redis.call('HSET', KEYS[7], ARGV[7], ARGV[1])
end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'event', ARGV[4])
redis.call('XACK', KEYS[2], ARGV[3], ARGV[2])
return 1
