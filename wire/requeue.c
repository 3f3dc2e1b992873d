/* requeue.c - giving tasks back to the queue, through the one requeue script (requeue.h). */
#include "wire/requeue.h"
#include "common/alloc.h"
#include "wire/keys.h"
#include "common/log.h"
#include "wire/lua_scripts.h"
#include "wire/msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MARKER_TTL_S 604800
#define PREEMPT_TTL_S 3600
#define STALE_TRIES 5 /* reads of a worker's lists that changed under requeue_worker_tasks before it gives up */

/* The scripts are wire/lua/requeue_task.lua and requeue_worker.lua, both around
 * requeue_one.lua.  Failures count in gantry:failures:<job>, not in the attempt: the attempt is
 * the generation (a planned resize or a preemption makes one too, and neither is a failure).
 * A job fails at its max_attempts-th failure.
 * The next attempt's task is encoded here, by the encoder that wrote the task (msg.h), not
 * in Lua: Redis's cjson would turn [] into {}, keep 14 digits of a real and write an integer
 * of more than 14 digits as a real. */
typedef struct {
    char job[MSG_ID_LEN], attempt[16];
    char retry[160], failures[128], preempt[160], live[192];
    char *next; /* the task with attempt + 1 (malloc'd) */
} next_task;

/* gantry:fed:<job>:<attempt>:live, the generation's record of its live sites (requeue_tolerate) */
static void live_key(char *out, size_t len, const char *job_id, int attempt)
{
    snprintf(out, len, "%s%s:%d:live", K_FED_PREFIX, job_id, attempt);
}

/* 0, or -1 when raw is not a task (nothing to give back: no worker could run it either) */
static int next_of(const char *raw, next_task *n)
{
    task_msg t;
    memset(n, 0, sizeof(*n));
    if (msg_task_decode(raw, &t) != 0) return -1;
    snprintf(n->job, sizeof(n->job), "%s", t.job_id);
    snprintf(n->attempt, sizeof(n->attempt), "%d", t.attempt);
    snprintf(n->retry, sizeof(n->retry), "%s%s:%d", K_RETRY_PREFIX, t.job_id, t.attempt);
    snprintf(n->failures, sizeof(n->failures), "%s%s", K_FAILURES_PREFIX, t.job_id);
    snprintf(n->preempt, sizeof(n->preempt), "%s%s:%d", K_PREEMPT_PREFIX, t.job_id, t.attempt);
    live_key(n->live, sizeof(n->live), t.job_id, t.attempt);
    t.attempt++;
    n->next = msg_task_encode(&t);
    msg_task_clear(&t);
    return n->next ? 0 : -1;
}

/* the arguments both scripts begin with (requeue_one.lua): 3 keys, then after them 4 values */
typedef struct {
    char maxlen[24], ttl[24], attempts[16];
} common_args;

static void common_args_of(common_args *a, int max_attempts)
{
    snprintf(a->maxlen, sizeof(a->maxlen), "%d", K_STREAM_MAXLEN);
    snprintf(a->ttl, sizeof(a->ttl), "%d", MARKER_TTL_S);
    snprintf(a->attempts, sizeof(a->attempts), "%d", max_attempts);
}

/* 0 with the script's integer in *out, -1 when Redis is unreachable or answered otherwise */
static int eval_int(rs_conn *r, int argc, const char **argv, const char *what, long long *out)
{
    redisReply *rep = rs_command_argv(r, argc, argv, NULL);
    int rc = -1;
    if (rep && rep->type == REDIS_REPLY_INTEGER) {
        *out = rep->integer;
        rc = 0;
    } else if (rep && rep->type == REDIS_REPLY_ERROR) {
        log_error("requeue %s: %s", what, rep->str);
    }
    freeReplyObject(rep);
    return rc;
}

/* LRANGE of the whole list into *rep; false when Redis is unreachable or it is no list */
static bool read_list(rs_conn *r, const char *key, redisReply **rep)
{
    *rep = rs_command(r, "LRANGE %s 0 -1", key);
    if (*rep && (*rep)->type == REDIS_REPLY_ARRAY) return true;
    freeReplyObject(*rep);
    *rep = NULL;
    return false;
}

/* one try: -2 when the lists changed between the reads and the script */
static int requeue_lists(rs_conn *r, const char *worker_id, int max_attempts, const char *why, const char *tasks,
                         const char *inflight)
{
    redisReply *lists[2] = {NULL, NULL}; /* in-flight first: the task a worker was running goes back first */
    if (!read_list(r, inflight, &lists[0]) || !read_list(r, tasks, &lists[1])) {
        freeReplyObject(lists[0]);
        return -1;
    }
    size_t total = lists[0]->elements + lists[1]->elements, k = 0;
    next_task *next = xcalloc(total + 1, sizeof(*next));
    const char **raw = xcalloc(total + 1, sizeof(*raw));
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < lists[l]->elements; i++)
            raw[k++] = lists[l]->element[i]->str;
    size_t ok = 0;
    for (size_t i = 0; i < total; i++) {
        if (next_of(raw[i], &next[ok]) == 0)
            ok++;
        else
            log_warn("worker %s held something that is not a task; dropped: %.120s", worker_id, raw[i]);
    }

    common_args a;
    common_args_of(&a, max_attempts);
    char nkeys[16], nin[24], ntasks[24];
    snprintf(nkeys, sizeof(nkeys), "%zu", 6 + 4 * ok);
    snprintf(nin, sizeof(nin), "%zu", lists[0]->elements);
    snprintf(ntasks, sizeof(ntasks), "%zu", lists[1]->elements);
    const char **argv = xcalloc(16 + 7 * ok + total, sizeof(*argv));
    int argc = 0;
    argv[argc++] = "EVAL", argv[argc++] = lua_requeue_worker, argv[argc++] = nkeys;
    argv[argc++] = K_JOBS_STREAM, argv[argc++] = K_EVENTS_STREAM, argv[argc++] = K_INFER_JOBS;
    argv[argc++] = tasks, argv[argc++] = inflight, argv[argc++] = K_WORKERS_SET;
    for (size_t i = 0; i < ok; i++)
        argv[argc++] = next[i].retry, argv[argc++] = next[i].failures, argv[argc++] = next[i].preempt, argv[argc++] = next[i].live;
    argv[argc++] = a.maxlen, argv[argc++] = a.ttl, argv[argc++] = a.attempts, argv[argc++] = why;
    argv[argc++] = worker_id, argv[argc++] = nin, argv[argc++] = ntasks;
    for (size_t i = 0; i < total; i++)
        argv[argc++] = raw[i];
    for (size_t i = 0; i < ok; i++)
        argv[argc++] = next[i].job, argv[argc++] = next[i].attempt, argv[argc++] = next[i].next;
    long long n = -1;
    int rc = eval_int(r, argc, argv, worker_id, &n) != 0 ? -1 : n < 0 ? -2 : (int)n;
    for (size_t i = 0; i < ok; i++)
        free(next[i].next);
    free(next);
    free(raw);
    free(argv);
    freeReplyObject(lists[0]);
    freeReplyObject(lists[1]);
    return rc;
}

int requeue_worker_tasks(rs_conn *r, const char *worker_id, int max_attempts, const char *why)
{
    char tasks[128], inflight[128];
    snprintf(tasks, sizeof(tasks), "%s%s", K_TASKS_PREFIX, worker_id);
    snprintf(inflight, sizeof(inflight), "%s%s", K_INFLIGHT_PREFIX, worker_id);
    int n = -2;
    for (int i = 0; i < STALE_TRIES && n == -2; i++)
        n = requeue_lists(r, worker_id, max_attempts, why, tasks, inflight);
    if (n == -2) {
        log_warn("worker %s's task lists kept changing while its tasks were given back; trying later", worker_id);
        return -1;
    }
    if (n > 0) log_warn("gave back %d task(s) of worker %s: %s", n, worker_id, why);
    return n;
}

int requeue_task(rs_conn *r, const char *raw, int max_attempts, const char *why, const char *source, const char *worker_id)
{
    next_task n;
    if (next_of(raw, &n) != 0) {
        log_warn("requeue: not a task; dropped: %.120s", raw);
        return 0;
    }
    common_args a;
    common_args_of(&a, max_attempts);
    const char *argv[] = {"EVAL",  lua_requeue_task, "6",       K_JOBS_STREAM, K_EVENTS_STREAM, K_INFER_JOBS,
                          n.retry, n.failures,       n.preempt, a.maxlen,      a.ttl,           a.attempts,
                          why,     source,           worker_id, n.job,         n.attempt,       n.next};
    long long done = 0;
    int rc = eval_int(r, (int)(sizeof(argv) / sizeof(argv[0])), argv, "task", &done) != 0 ? -1 : (int)done;
    free(n.next);
    return rc;
}

int requeue_ask(rs_conn *r, const char *job_id, int attempt, const char *by)
{
    redisReply *rep = rs_command(r, "SET %s%s:%d %s NX EX %d", K_PREEMPT_PREFIX, job_id, attempt, by, PREEMPT_TTL_S);
    int n = !rep || rep->type == REDIS_REPLY_ERROR ? -1 : rep->type == REDIS_REPLY_STATUS;
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

int requeue_forgive(rs_conn *r, const char *job_id)
{
    redisReply *rep = rs_command(r, "DEL %s%s", K_FAILURES_PREFIX, job_id);
    int n = !rep || rep->type != REDIS_REPLY_INTEGER ? -1 : rep->integer > 0;
    freeReplyObject(rep);
    return n;
}

int requeue_tolerate(rs_conn *r, const char *job_id, int attempt, const char *worker_id, int site, int threshold)
{
    char key[192];
    live_key(key, sizeof(key), job_id, attempt);
    redisReply *rep = rs_command(r, "HSET %s %s %d t %d", key, worker_id, site, threshold);
    int rc = !rep || rep->type != REDIS_REPLY_INTEGER ? -1 : 0;
    freeReplyObject(rep);
    if (rc == 0) {
        rep = rs_command(r, "EXPIRE %s %d", key, MARKER_TTL_S);
        rc = !rep || rep->type != REDIS_REPLY_INTEGER ? -1 : 0;
        freeReplyObject(rep);
    }
    return rc;
}

int requeue_live_sites(rs_conn *r, const char *job_id, int attempt, uint64_t *sites)
{
    *sites = 0;
    char key[192];
    live_key(key, sizeof(key), job_id, attempt);
    redisReply *rep = rs_command(r, "HGETALL %s", key);
    int rc = !rep || rep->type != REDIS_REPLY_ARRAY ? -1 : 0;
    for (size_t i = 0; rc == 0 && i + 1 < rep->elements; i += 2) {
        const char *field = rep->element[i]->str, *value = rep->element[i + 1]->str;
        char *end;
        long site = value ? strtol(value, &end, 10) : -1;
        if (field && strcmp(field, "t") != 0 && value && !*end && site >= 0 && site < 64) *sites |= UINT64_C(1) << site;
    }
    freeReplyObject(rep);
    return rc;
}
