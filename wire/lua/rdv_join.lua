-- rdv_join: a gang member takes the next rank in its generation's rendezvous
-- (workers/rendezvous.c).
-- KEYS[1] gantry:rdv:<job>:<gen>  ARGV[1] the gang's size  ARGV[2] the member's address
-- ARGV[3] its worker id  ARGV[4] the hash's TTL in ms
-- Result: the rank (0..size-1), with addr:<rank> and worker:<rank> written; -1 when every
-- rank is taken (nothing written).
local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
if n >= tonumber(ARGV[1]) then return -1 end
redis.call('HSET', KEYS[1], 'n', n + 1, 'addr:' .. n, ARGV[2], 'worker:' .. n, ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return n
