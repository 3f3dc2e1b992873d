-- requeue_worker: gives back every task of a worker and removes it from the registry
-- (wire/requeue.c, requeue_worker_tasks).
-- prepend: requeue_one.lua
-- KEYS[1..3] and ARGV[1..4] as in requeue_one.lua, then
--   KEYS[4] gantry:tasks:<worker>  KEYS[5] gantry:inflight:<worker>  KEYS[6] gantry:workers
--   KEYS[7 + 4i .. 10 + 4i] for the i-th task C could decode (i from 0): gantry:retry:<job>:<attempt>,
--     gantry:failures:<job>, gantry:preempt:<job>:<attempt>, gantry:fed:<job>:<attempt>:live
--   ARGV[5] worker id  ARGV[6] n, the number of tasks C read from the in-flight list
--   ARGV[7] m, the number C read from the task list
--   ARGV[8 .. 7 + n + m] those tasks as read: the in-flight list's, then the task list's
--   then for the i-th decodable task, in the same order, 3 values: job id, attempt, the task
--     with attempt + 1
-- Result: the number of tasks given back (the lists and the worker's entry in gantry:workers
-- are deleted); -1 when the lists no longer hold exactly the tasks C read (a task moved or
-- arrived meanwhile): nothing was changed, and C reads them again.
local n, m = tonumber(ARGV[6]), tonumber(ARGV[7])
local at = 8
for _, list in ipairs({{KEYS[5], n}, {KEYS[4], m}}) do
  local now_in = redis.call('LRANGE', list[1], 0, -1)
  if #now_in ~= list[2] then return -1 end
  for i = 1, list[2] do
    if now_in[i] ~= ARGV[at] then return -1 end
    at = at + 1
  end
end
local done = 0
for i = 0, (#KEYS - 6) / 4 - 1 do
  local k = {retry = KEYS[7 + 4 * i], failures = KEYS[8 + 4 * i], preempt = KEYS[9 + 4 * i], live = KEYS[10 + 4 * i]}
  local a = at + 3 * i
  done = done + requeue_one(k, ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2], ARGV[4], 'scheduler', ARGV[5],
                            tonumber(ARGV[3]), ms)
end
redis.call('DEL', KEYS[4], KEYS[5])
redis.call('SREM', KEYS[6], ARGV[5])
return done
