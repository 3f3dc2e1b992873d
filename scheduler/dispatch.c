#include "scheduler/dispatch.h"
#include "common/keys.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS: claim, tasks list, jobs stream, events stream
 * ARGV: worker, task, entry id, group, event, maxlen */
static const char script[] = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', 604800) then "
                             "  redis.call('LPUSH', KEYS[2], ARGV[2]) "
                             "  redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[6], '*', 'event', ARGV[5]) "
                             "  redis.call('XACK', KEYS[3], ARGV[4], ARGV[3]) "
                             "  return 1 "
                             "end "
                             "redis.call('XACK', KEYS[3], ARGV[4], ARGV[3]) "
                             "return 0";

dispatch_result dispatch_to(rs_conn *r, const sched_entry *e, const char *worker_id)
{
    char claim[160], tasks[128], maxlen[24];
    snprintf(claim, sizeof(claim), "%s%s:%d", K_CLAIM_PREFIX, e->task.job_id, e->task.attempt);
    snprintf(tasks, sizeof(tasks), "%s%s", K_TASKS_PREFIX, worker_id);
    snprintf(maxlen, sizeof(maxlen), "%d", K_STREAM_MAXLEN);

    event_msg ev;
    msg_event_init(&ev, e->task.job_id, "scheduler");
    snprintf(ev.state, sizeof(ev.state), "scheduled");
    snprintf(ev.reason, sizeof(ev.reason), "assigned to worker %s", worker_id);
    snprintf(ev.worker, sizeof(ev.worker), "%s", worker_id);
    char *evs = msg_event_encode(&ev);
    if (!evs) return DISPATCH_ERROR;

    const char *argv[] = {"EVAL",    script, "4",         claim,         tasks, K_JOBS_STREAM, K_EVENTS_STREAM,
                          worker_id, e->raw, e->entry_id, K_SCHED_GROUP, evs,   maxlen};
    size_t lens[sizeof(argv) / sizeof(argv[0])];
    for (size_t i = 0; i < sizeof(argv) / sizeof(argv[0]); i++)
        lens[i] = strlen(argv[i]);
    redisReply *rep = rs_command_argv(r, (int)(sizeof(argv) / sizeof(argv[0])), argv, lens);
    free(evs);
    dispatch_result res = DISPATCH_ERROR;
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        res = rep->integer == 1 ? DISPATCH_OK : DISPATCH_DUPLICATE;
    else if (rep && rep->type == REDIS_REPLY_ERROR)
        log_error("dispatch %s: %s", e->task.job_id, rep->str);
    freeReplyObject(rep);
    return res;
}

void dispatch_drop(rs_conn *r, const char *entry_id)
{
    freeReplyObject(rs_command(r, "XACK %s %s %s", K_JOBS_STREAM, K_SCHED_GROUP, entry_id));
}
