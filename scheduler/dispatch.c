#include "scheduler/dispatch.h"
#include "common/keys.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* KEYS: claim, jobs stream, events stream, cancel key, task list of each worker...
 * ARGV: task, entry id, group, event, maxlen, first worker id.  An inference job is
 * also registered in gantry:infer:jobs for the autoscaler, in the same step, and
 * a gang's size is written into its generation's rendezvous (an elastic gang's
 * members learn their world there). */
static const char script[] =
    "if redis.call('EXISTS', KEYS[4]) == 1 then "
    "  redis.call('XACK', KEYS[2], ARGV[3], ARGV[2]) return 2 "
    "end "
    "if redis.call('SET', KEYS[1], ARGV[6], 'NX', 'EX', 604800) then "
    "  for i = 5, #KEYS do redis.call('LPUSH', KEYS[i], ARGV[1]) end "
    "  if #KEYS > 5 or string.find(ARGV[1], '\"workers\":{', 1, true) then "
    "    local rdv = '" K_RDV_PREFIX "' .. string.match(ARGV[1], '\"job_id\":\"([^\"]+)\"') .. ':' .. "
    "                (string.match(ARGV[1], '\"attempt\":(%d+)') or '0') "
    "    redis.call('HSET', rdv, 'world', #KEYS - 4) "
    "    redis.call('PEXPIRE', rdv, 86400000) "
    "    local t = cjson.decode(ARGV[1]) "
    "    if type(t.spec) == 'table' and type(t.spec.workers) == 'table' then "
    "      redis.call('HSET', '" K_ELASTIC "', t.job_id, tostring(t.spec.workers.max)) "
    "    end "
    "  end "
    "  if string.find(ARGV[1], '\"type\":\"inference\"', 1, true) then "
    "    redis.call('HSET', '" K_INFER_JOBS "', string.match(ARGV[1], '\"job_id\":\"([^\"]+)\"'), ARGV[1]) "
    "  end "
    "  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*', 'event', ARGV[4]) "
    "  redis.call('XACK', KEYS[2], ARGV[3], ARGV[2]) "
    "  return 1 "
    "end "
    "redis.call('XACK', KEYS[2], ARGV[3], ARGV[2]) "
    "return 0";

int dispatch_send(rs_conn *r, const sched_entry *e, const char *const *worker_ids, int n)
{
    if (!rs_ensure(r)) return -1;
    char claim[160], cancel[128], maxlen[24], nkeys[16];
    snprintf(cancel, sizeof(cancel), "%s%s", K_CANCEL_PREFIX, e->task.job_id);
    snprintf(claim, sizeof(claim), "%s%s:%d", K_CLAIM_PREFIX, e->task.job_id, e->task.attempt);
    snprintf(maxlen, sizeof(maxlen), "%d", K_STREAM_MAXLEN);
    snprintf(nkeys, sizeof(nkeys), "%d", 4 + n);

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
    const char **argv = malloc(sizeof(char *) * (size_t)(13 + n));
    char(*lists)[128] = malloc(sizeof(*lists) * (size_t)n);
    argv[argc++] = "EVAL";
    argv[argc++] = script;
    argv[argc++] = nkeys;
    argv[argc++] = claim;
    argv[argc++] = K_JOBS_STREAM;
    argv[argc++] = K_EVENTS_STREAM;
    argv[argc++] = cancel;
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
    size_t *lens = malloc(sizeof(size_t) * (size_t)argc);
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
    freeReplyObject(rs_command(r, "XACK %s %s %s", K_JOBS_STREAM, K_SCHED_GROUP, entry_id));
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
    redisReply *rep = NULL;
    if (!r->c || redisGetReply(r->c, (void **)&rep) != REDIS_OK) {
        rs_close(r);
        return -1;
    }
    int ok = rep->type == REDIS_REPLY_STRING;
    freeReplyObject(rep);
    return ok ? 0 : -1;
}
