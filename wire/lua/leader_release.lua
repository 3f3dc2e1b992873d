-- leader_release: a stopping scheduler gives its lease up (scheduler/main.c).
-- KEYS[1] gantry:leader  ARGV[1] this scheduler's name
-- Result: 1 released; 0 when the lease was not ours (left alone).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
