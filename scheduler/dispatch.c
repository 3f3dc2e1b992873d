/* dispatch.c - putting one job on its workers in one script call (dispatch.h). */
#include "scheduler/dispatch.h"
#include "common/alloc.h"
#include "common/jobtypes.h"
#include "wire/keys.h"
#include "common/log.h"
#include "wire/lua_scripts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the autoscaler manages the job's replicas (a serving type: inference): its task goes
 * into gantry:infer:jobs. */
static bool is_served(const task_msg *t)
{
    return (job_type_traits(t->type) & JT_SERVING) != 0;
}

/* The script is wire/lua/dispatch.lua; what it learns of the task (job id, elastic, served)
 * comes from here, not from its JSON text. */
int dispatch_send(rs_conn *r, const sched_entry *e, const char *const *worker_ids, int n)
{
    if (!rs_ensure(r)) return -1;
    char claim[160], cancel[128], rdv[160], maxlen[24], nkeys[16], elastic_max[16];
    snprintf(cancel, sizeof(cancel), "%s%s", K_CANCEL_PREFIX, e->task.job_id);
    snprintf(claim, sizeof(claim), "%s%s:%d", K_CLAIM_PREFIX, e->task.job_id, e->task.attempt);
    snprintf(rdv, sizeof(rdv), "%s%s:%d", K_RDV_PREFIX, e->task.job_id, e->task.attempt);
    snprintf(maxlen, sizeof(maxlen), "%d", K_STREAM_MAXLEN);
    snprintf(nkeys, sizeof(nkeys), "%d", 7 + n);
    snprintf(elastic_max, sizeof(elastic_max), "%d", e->max_slots > 0 ? e->max_slots : 0);

    event_msg ev;
    msg_event_init(&ev, e->task.job_id, "scheduler");
    snprintf(ev.state, sizeof(ev.state), "scheduled");
    snprintf(ev.worker, sizeof(ev.worker), "%s", worker_ids[0]);
    int len = snprintf(ev.reason, sizeof(ev.reason), "assigned to worker%s", n > 1 ? "s" : "");
    for (int i = 0; i < n && len < (int)sizeof(ev.reason); i++)
        len += snprintf(ev.reason + len, sizeof(ev.reason) - (size_t)len, "%s%s", i ? ", " : " ", worker_ids[i]);
    char *evs = msg_event_encode(&ev);
    if (!evs) return -1;

    int argc = 0;
    const char **argv = xmalloc(sizeof(char *) * (size_t)(19 + n));
    char(*lists)[128] = xmalloc(sizeof(*lists) * (size_t)n);
    argv[argc++] = "EVAL";
    argv[argc++] = lua_dispatch;
    argv[argc++] = nkeys;
    argv[argc++] = claim;
    argv[argc++] = K_JOBS_STREAM;
    argv[argc++] = K_EVENTS_STREAM;
    argv[argc++] = cancel;
    argv[argc++] = rdv;
    argv[argc++] = K_ELASTIC;
    argv[argc++] = K_INFER_JOBS;
    for (int i = 0; i < n; i++) {
        snprintf(lists[i], sizeof(lists[i]), "%s%s", K_TASKS_PREFIX, worker_ids[i]);
        argv[argc++] = lists[i];
    }
    argv[argc++] = e->raw;
    argv[argc++] = e->entry_id;
    argv[argc++] = K_SCHED_GROUP;
    argv[argc++] = evs;
    argv[argc++] = maxlen;
    argv[argc++] = worker_ids[0];
    argv[argc++] = e->task.job_id;
    argv[argc++] = elastic_max;
    argv[argc++] = is_served(&e->task) ? "1" : "0";
    size_t *lens = xmalloc(sizeof(size_t) * (size_t)argc);
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    int rc = redisAppendCommandArgv(r->c, argc, argv, lens) == REDIS_OK ? 0 : -1;
    free(lens);
    free(lists);
    free(argv);
    free(evs);
    return rc;
}

dispatch_result dispatch_recv(rs_conn *r, const char *job_id)
{
    redisReply *rep = NULL;
    if (!r->c || redisGetReply(r->c, (void **)&rep) != REDIS_OK) {
        rs_close(r);
        return DISPATCH_ERROR;
    }
    dispatch_result res = DISPATCH_ERROR;
    if (rep->type == REDIS_REPLY_INTEGER)
        res = rep->integer == 1 ? DISPATCH_OK : rep->integer == 2 ? DISPATCH_CANCELLED : DISPATCH_DUPLICATE;
    else if (rep->type == REDIS_REPLY_ERROR)
        log_error("dispatch %s: %s", job_id, rep->str);
    freeReplyObject(rep);
    return res;
}

dispatch_result dispatch_to(rs_conn *r, const sched_entry *e, const char *const *worker_ids, int n)
{
    return dispatch_send(r, e, worker_ids, n) == 0 ? dispatch_recv(r, e->task.job_id) : DISPATCH_ERROR;
}

void dispatch_drop(rs_conn *r, const char *entry_id)
{
    /* not acknowledged: the entry stays pending and is read again after a restart, where it is a
     * duplicate or still cancelled (rs_do logged why) */
    rs_do(r, "XACK %s %s %s", K_JOBS_STREAM, K_SCHED_GROUP, entry_id);
}

int dispatch_note_send(rs_conn *r, const char *job_id, const char *reason)
{
    if (!rs_ensure(r)) return -1;
    event_msg ev;
    msg_event_init(&ev, job_id, "scheduler");
    snprintf(ev.reason, sizeof(ev.reason), "%s", reason);
    char *s = msg_event_encode(&ev);
    if (!s) return -1;
    int rc =
        redisAppendCommand(r->c, "XADD %s MAXLEN ~ %d * %s %s", K_EVENTS_STREAM, K_STREAM_MAXLEN, F_EVENT, s) == REDIS_OK ? 0 : -1;
    free(s);
    return rc;
}

int dispatch_note_recv(rs_conn *r)
{
    redisReply *rep = rs_get_reply(r, "XADD");
    if (!rep) return -1;
    int ok = rep->type == REDIS_REPLY_STRING;
    freeReplyObject(rep);
    return ok ? 0 : -1;
}
