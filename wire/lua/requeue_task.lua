-- requeue_task: gives one task back (wire/requeue.c, requeue_task).
-- prepend: requeue_one.lua
-- KEYS[1..3] and ARGV[1..4] as in requeue_one.lua, then
--   KEYS[4] gantry:retry:<job>:<attempt>  KEYS[5] gantry:failures:<job>
--   KEYS[6] gantry:preempt:<job>:<attempt>
--   ARGV[5] source  ARGV[6] worker id  ARGV[7] job id  ARGV[8] attempt
--   ARGV[9] the task with attempt + 1
-- Result: 1 requeued (or failed, past max attempts; or an inference replica noted),
-- 0 when that attempt was already requeued or finished (its retry marker is set).
local k = {retry = KEYS[4], failures = KEYS[5], preempt = KEYS[6]}
return requeue_one(k, ARGV[7], tonumber(ARGV[8]), ARGV[9], ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[3]), ms)
