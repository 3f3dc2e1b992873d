-- leader_renew: the scheduler renews its lease (scheduler/main.c).
-- KEYS[1] gantry:leader  ARGV[1] this scheduler's name  ARGV[2] the lease in ms
-- Result: 1 renewed; 0 when the lease is not ours (expired, or another scheduler holds it).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
