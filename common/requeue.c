#include "common/requeue.h"
#include "common/keys.h"
#include "common/log.h"

#include <stdio.h>
#include <string.h>

#define MARKER_TTL_S 604800
#define PREEMPT_TTL_S 3600

/* Failures count in gantry:failures:<job>, not in the attempt: the attempt is
 * the generation (a planned resize or a preemption makes one too, and neither
 * is a failure).  A job fails at its max_attempts-th failure.
 * The task JSON is edited as text (its "attempt" comes before "spec", which is
 * never decoded here: re-encoding would turn [] into {} and round numbers).
 * requeue_one(raw, why, source, worker, max_attempts, now_ms): 1 when it acted. */
#define REQUEUE_ONE_LUA                                                                                                            \
    "local function requeue_one(raw, why, source, worker, maxa, ms) "                                                              \
    "  local job = string.match(raw, '\"job_id\":\"([^\"]+)\"') "                                                                  \
    "  if not job then return 0 end "                                                                                              \
    "  local cur = tonumber(string.match(raw, '\"attempt\":(%d+)') or '0') "                                                       \
    "  if string.find(raw, '\"type\":\"inference\"', 1, true) and "                                                                \
    "     redis.call('HEXISTS', '" K_INFER_JOBS "', job) == 1 then "                                                               \
    "    local note = {id = 'e_' .. job .. '_' .. (ms % 100000000), job_id = job, ts = ms, source = source, "                      \
    "                  worker = worker, progress = -1, state = '', "                                                               \
    "                  reason = why .. '; a replica of an inference job: the autoscaler starts another'} "                         \
    "    redis.call('XADD', '" K_EVENTS_STREAM "', 'MAXLEN', '~', " MAXLEN_STR ", '*', 'event', cjson.encode(note)) "              \
    "    redis.call('DEL', '" K_PREEMPT_PREFIX "' .. job .. ':' .. cur) "                                                          \
    "    return 1 "                                                                                                                \
    "  end "                                                                                                                       \
    "  local mark = (maxa == 0) and 'requeued' or 'failure' "                                                                      \
    "  if not redis.call('SET', '" K_RETRY_PREFIX "' .. job .. ':' .. cur, mark, 'NX', 'EX', " MARKER_TTL_STR ") then "            \
    "    return 0 "                                                                                                                \
    "  end "                                                                                                                       \
    "  local attempt = cur + 1 "                                                                                                   \
    "  local ev = {id = 'e_rq_' .. job .. '_' .. attempt, job_id = job, ts = ms, source = source, worker = worker, progress = "    \
    "-1} "                                                                                                                         \
    "  local failures = 0 "                                                                                                        \
    "  if maxa > 0 then "                                                                                                          \
    "    failures = redis.call('INCR', '" K_FAILURES_PREFIX "' .. job) "                                                           \
    "    redis.call('EXPIRE', '" K_FAILURES_PREFIX "' .. job, " MARKER_TTL_STR ") "                                                \
    "  end "                                                                                                                       \
    "  if failures < maxa or maxa == 0 then "                                                                                      \
    "    local task = string.gsub(raw, '\"attempt\":%d+', '\"attempt\":' .. attempt, 1) "                                          \
    "    redis.call('XADD', '" K_JOBS_STREAM "', 'MAXLEN', '~', " MAXLEN_STR ", '*', 'job', task) "                                \
    "    ev.state = 'queued' "                                                                                                     \
    "    if maxa == 0 then ev.reason = why .. '; requeued' "                                                                       \
    "    else ev.reason = why .. '; requeued (failure ' .. failures .. ' of ' .. maxa .. ' allowed)' end "                         \
    "  else "                                                                                                                      \
    "    ev.state = 'failed' "                                                                                                     \
    "    ev.reason = why .. ' (failure ' .. failures .. ' of ' .. maxa .. ' allowed)' "                                            \
    "  end "                                                                                                                       \
    "  redis.call('XADD', '" K_EVENTS_STREAM "', 'MAXLEN', '~', " MAXLEN_STR ", '*', 'event', cjson.encode(ev)) "                  \
    "  return 1 "                                                                                                                  \
    "end "                                                                                                                         \
    "local t = redis.call('TIME') "                                                                                                \
    "local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "

#define STR2(x) #x
#define STR(x) STR2(x)
#define MARKER_TTL_STR STR(MARKER_TTL_S)
#define MAXLEN_STR STR(K_STREAM_MAXLEN)

/* KEYS: tasks, inflight, workers set.  ARGV: worker id, max attempts, why */
static const char worker_script[] = REQUEUE_ONE_LUA "local n = 0 "
                                                    "for _, key in ipairs({KEYS[2], KEYS[1]}) do "
                                                    "  for _, raw in ipairs(redis.call('LRANGE', key, 0, -1)) do "
                                                    "    n = n + requeue_one(raw, ARGV[3], 'scheduler', ARGV[1], "
                                                    "                        tonumber(ARGV[2]), ms) "
                                                    "  end "
                                                    "end "
                                                    "redis.call('DEL', KEYS[1], KEYS[2]) "
                                                    "redis.call('SREM', KEYS[3], ARGV[1]) "
                                                    "return n";

/* ARGV: raw, max attempts, why, source, worker */
static const char task_script[] = REQUEUE_ONE_LUA "return requeue_one(ARGV[1], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[2]), ms)";

static int eval_int(rs_conn *r, int argc, const char **argv, const char *what)
{
    size_t lens[16];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    redisReply *rep = rs_command_argv(r, argc, argv, lens);
    int n = -1;
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        n = (int)rep->integer;
    else if (rep && rep->type == REDIS_REPLY_ERROR)
        log_error("requeue %s: %s", what, rep->str);
    freeReplyObject(rep);
    return n;
}

int requeue_worker_tasks(rs_conn *r, const char *worker_id, int max_attempts, const char *why)
{
    char tasks[128], inflight[128], attempts[16];
    snprintf(tasks, sizeof(tasks), "%s%s", K_TASKS_PREFIX, worker_id);
    snprintf(inflight, sizeof(inflight), "%s%s", K_INFLIGHT_PREFIX, worker_id);
    snprintf(attempts, sizeof(attempts), "%d", max_attempts);
    const char *argv[] = {"EVAL", worker_script, "3", tasks, inflight, K_WORKERS_SET, worker_id, attempts, why};
    int n = eval_int(r, (int)(sizeof(argv) / sizeof(argv[0])), argv, worker_id);
    if (n > 0) log_warn("gave back %d task(s) of worker %s: %s", n, worker_id, why);
    return n;
}

int requeue_task(rs_conn *r, const char *raw, int max_attempts, const char *why, const char *source, const char *worker_id)
{
    char attempts[16];
    snprintf(attempts, sizeof(attempts), "%d", max_attempts);
    const char *argv[] = {"EVAL", task_script, "0", raw, attempts, why, source, worker_id};
    return eval_int(r, (int)(sizeof(argv) / sizeof(argv[0])), argv, "task");
}

int requeue_ask(rs_conn *r, const char *job_id, int attempt, const char *by)
{
    redisReply *rep = rs_command(r, "SET %s%s:%d %s NX EX %d", K_PREEMPT_PREFIX, job_id, attempt, by, PREEMPT_TTL_S);
    int n = !rep ? -1 : rep->type == REDIS_REPLY_STATUS;
    freeReplyObject(rep);
    return n;
}

int requeue_mark_done(rs_conn *r, const char *job_id, int attempt)
{
    redisReply *rep = rs_command(r, "SET %s%s:%d done NX EX %d", K_RETRY_PREFIX, job_id, attempt, MARKER_TTL_S);
    int n = !rep ? -1 : rep->type == REDIS_REPLY_STATUS ? 1 : rep->type == REDIS_REPLY_NIL ? 0 : -1;
    freeReplyObject(rep);
    return n;
}
