-- infer_enqueue: one inference request into its job's queue (server/infer.c).
-- KEYS[1] gantry:infer:q:<job>  KEYS[2] gantry:infer:stats:<job>
-- ARGV[1] the job's queue limit  ARGV[2] the request
-- Result: 1 queued (arrivals counted); 0 the queue is full: nothing queued, counted as a drop.
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[1]) then
  redis.call('HINCRBY', KEYS[2], 'drops', 1)
  return 0
end
redis.call('LPUSH', KEYS[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], 'arrivals', 1)
return 1
