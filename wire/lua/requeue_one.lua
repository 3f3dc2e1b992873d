-- requeue_one: the body shared by requeue_task.lua and requeue_worker.lua (the build
-- prepends this file to each; wire/requeue.h says when a task is requeued).
-- Both scripts begin with the same KEYS and ARGV:
--   KEYS[1] gantry:jobs  KEYS[2] gantry:events  KEYS[3] gantry:infer:jobs
--   ARGV[1] the streams' MAXLEN  ARGV[2] the retry marker's and failure count's TTL (s)
--   ARGV[3] max attempts (0: no limit, the requeue is no failure)  ARGV[4] why
-- requeue_one(k, job, cur, task, why, source, worker, maxa, ms) requeues one task:
--   k: {retry = gantry:retry:<job>:<cur>, failures = gantry:failures:<job>,
--       preempt = gantry:preempt:<job>:<cur>, live = gantry:fed:<job>:<cur>:live or nil (a lost worker:
--       requeue_worker.lua)}; job: its job id; cur: its attempt;
--   task: the same task with attempt cur + 1 (encoded in C: no JSON is parsed here).
-- It returns 1 when it acted: a replica of an inference job the autoscaler knows only gets
-- an event (its preemption key is deleted: it keeps its generation); so does a lost site of a
-- federated generation that goes on without it (k.live holds the worker, not site 0, and t
-- sites remain without it: the worker leaves the hash); a worker that already left it: 0;
-- otherwise the marker is
-- set NX and the task goes back to gantry:jobs with a "queued" event, or, at the
-- max_attempts-th failure, only a "failed" event.  0 when the marker was already set
-- (another member or the scheduler requeued that attempt, or it finished).
local function requeue_one(k, job, cur, task, why, source, worker, maxa, ms)
  if redis.call('HEXISTS', KEYS[3], job) == 1 then
    local note = {id = 'e_' .. job .. '_' .. (ms % 100000000), job_id = job, ts = ms, source = source,
                  worker = worker, progress = -1, state = '',
                  reason = why .. '; a replica of an inference job: the autoscaler starts another'}
    redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'event', cjson.encode(note))
    redis.call('DEL', k.preempt)
    return 1
  end
  if k.live and redis.call('EXISTS', k.live) == 1 then
    local site = redis.call('HGET', k.live, worker)
    if not site then return 0 end -- dropped before: its generation went on without it
    local t = tonumber(redis.call('HGET', k.live, 't'))
    local left = redis.call('HLEN', k.live) - 2 -- the sites without this one (t is a field too)
    if site ~= '0' and t and left >= t then
      redis.call('HDEL', k.live, worker)
      local note = {id = 'e_' .. job .. '_' .. (ms % 100000000) .. '_' .. site, job_id = job, ts = ms,
                    source = source, worker = worker, progress = -1, state = '',
                    reason = why .. '; site ' .. site .. ' dropped: the rounds go on with the other ' .. left ..
                             ' sites (threshold ' .. t .. ')'}
      redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'event', cjson.encode(note))
      return 1
    end
  end
  local mark = (maxa == 0) and 'requeued' or 'failure'
  if not redis.call('SET', k.retry, mark, 'NX', 'EX', ARGV[2]) then
    return 0
  end
  local attempt = cur + 1
  local ev = {id = 'e_rq_' .. job .. '_' .. attempt, job_id = job, ts = ms, source = source, worker = worker,
              progress = -1}
  local failures = 0
  if maxa > 0 then
    failures = redis.call('INCR', k.failures)
    redis.call('EXPIRE', k.failures, ARGV[2])
  end
  if failures < maxa or maxa == 0 then
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'job', task)
    ev.state = 'queued'
    if maxa == 0 then
      ev.reason = why .. '; requeued'
    else
      ev.reason = why .. '; requeued (failure ' .. failures .. ' of ' .. maxa .. ' allowed)'
    end
  else
    ev.state = 'failed'
    ev.reason = why .. ' (failure ' .. failures .. ' of ' .. maxa .. ' allowed)'
  end
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'event', cjson.encode(ev))
  return 1
end

local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
