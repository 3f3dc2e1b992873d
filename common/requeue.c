#include "common/requeue.h"
#include "common/keys.h"
#include "common/log.h"

#include <stdio.h>
#include <string.h>

/* The task JSON is edited as text (its "attempt" comes before "spec", which is
 * never decoded here: re-encoding would turn [] into {} and round numbers).
 * KEYS: tasks, inflight, jobs stream, events stream, workers set
 * ARGV: worker id, max attempts, stream maxlen, why */
static const char script[] =
    "local t = redis.call('TIME') "
    "local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "local n = 0 "
    "for _, key in ipairs({KEYS[2], KEYS[1]}) do "
    "  for _, raw in ipairs(redis.call('LRANGE', key, 0, -1)) do "
    "    local job = string.match(raw, '\"job_id\":\"([^\"]+)\"') "
    "    local attempt = tonumber(string.match(raw, '\"attempt\":(%d+)') or '0') + 1 "
    "    if job then "
    "      local ev = {id = 'e_lost_' .. job .. '_' .. attempt, job_id = job, ts = ms, source = 'scheduler', "
    "                  worker = ARGV[1], progress = -1} "
    "      if attempt < tonumber(ARGV[2]) then "
    "        local task = string.gsub(raw, '\"attempt\":%d+', '\"attempt\":' .. attempt, 1) "
    "        redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'job', task) "
    "        ev.state = 'queued' "
    "        ev.reason = ARGV[4] .. '; requeued (attempt ' .. (attempt + 1) .. ' of ' .. ARGV[2] .. ')' "
    "      else "
    "        ev.state = 'failed' "
    "        ev.reason = ARGV[4] .. ' on the last of ' .. ARGV[2] .. ' attempts' "
    "      end "
    "      redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[3], '*', 'event', cjson.encode(ev)) "
    "      n = n + 1 "
    "    end "
    "  end "
    "end "
    "redis.call('DEL', KEYS[1], KEYS[2]) "
    "redis.call('SREM', KEYS[5], ARGV[1]) "
    "return n";

int requeue_worker_tasks(rs_conn *r, const char *worker_id, int max_attempts, const char *why)
{
    char tasks[128], inflight[128], attempts[16], maxlen[24];
    snprintf(tasks, sizeof(tasks), "%s%s", K_TASKS_PREFIX, worker_id);
    snprintf(inflight, sizeof(inflight), "%s%s", K_INFLIGHT_PREFIX, worker_id);
    snprintf(attempts, sizeof(attempts), "%d", max_attempts);
    snprintf(maxlen, sizeof(maxlen), "%d", K_STREAM_MAXLEN);
    const char *argv[] = {"EVAL",          script,        "5",       tasks,    inflight, K_JOBS_STREAM,
                          K_EVENTS_STREAM, K_WORKERS_SET, worker_id, attempts, maxlen,   why};
    size_t lens[sizeof(argv) / sizeof(argv[0])];
    for (size_t i = 0; i < sizeof(argv) / sizeof(argv[0]); i++)
        lens[i] = strlen(argv[i]);
    redisReply *rep = rs_command_argv(r, (int)(sizeof(argv) / sizeof(argv[0])), argv, lens);
    int n = -1;
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        n = (int)rep->integer;
    else if (rep && rep->type == REDIS_REPLY_ERROR)
        log_error("requeue %s: %s", worker_id, rep->str);
    freeReplyObject(rep);
    if (n > 0) log_warn("gave back %d task(s) of worker %s: %s", n, worker_id, why);
    return n;
}
