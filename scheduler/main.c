/* gantry-scheduler: reads gantry:jobs with a consumer group and places each job
 * on a free worker.  An entry is acknowledged only in the same atomic step that
 * puts it in a worker's task list (dispatch.c), so a scheduler killed at any
 * moment loses nothing: on start it reads its own unacknowledged entries again. */
#include "common/config.h"
#include "common/keys.h"
#include "common/log.h"
#include "common/redis_sync.h"
#include "scheduler/dispatch.h"
#include "scheduler/queue.h"
#include "scheduler/registry.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static config_opt opts[] = {
    CONFIG_OPT("redis", "Redis address host:port", "127.0.0.1:6380"),
    CONFIG_OPT("redis-password", "Redis AUTH password (empty: none)", ""),
    CONFIG_OPT("name", "this scheduler's consumer name in the gantry:jobs group", "scheduler"),
    CONFIG_OPT("log-level", "debug, info, warn or error", "info"),
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))
#define OPT(name) config_get(opts, NOPTS, name)

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static void ensure_group(rs_conn *r)
{
    freeReplyObject(rs_command(r, "XGROUP CREATE %s %s 0 MKSTREAM", K_JOBS_STREAM, K_SCHED_GROUP));
}

/* reads entries; from_id "0" pages through our own pending entries, ">" waits for new ones.
 * Returns the number read, -1 on error; *last gets the last id (for paging). */
static int read_jobs(rs_conn *r, const char *name, sched_queue *q, const char *from_id, int block_ms, char *last)
{
    redisReply *rep = rs_command(r, "XREADGROUP GROUP %s %s COUNT 256 BLOCK %d STREAMS %s %s", K_SCHED_GROUP, name, block_ms,
                                 K_JOBS_STREAM, from_id);
    if (!rep) return -1;
    if (rep->type == REDIS_REPLY_ERROR) {
        log_warn("XREADGROUP: %s", rep->str);
        if (strncmp(rep->str, "NOGROUP", 7) == 0) ensure_group(r);
        freeReplyObject(rep);
        return -1;
    }
    int count = 0;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements > 0) {
        redisReply *entries = rep->element[0]->element[1];
        for (size_t i = 0; i < entries->elements; i++) {
            redisReply *e = entries->element[i];
            const char *id = e->element[0]->str;
            snprintf(last, 64, "%s", id);
            count++;
            redisReply *fields = e->element[1];
            const char *raw = NULL;
            for (size_t f = 0; fields->type == REDIS_REPLY_ARRAY && f + 1 < fields->elements; f += 2)
                if (strcmp(fields->element[f]->str, F_JOB) == 0) raw = fields->element[f + 1]->str;
            task_msg t;
            if (!raw || msg_task_decode(raw, &t) != 0) {
                log_warn("dropping malformed gantry:jobs entry %s", id);
                dispatch_drop(r, id);
                continue;
            }
            sq_push(q, id, strdup(raw), &t);
        }
    }
    freeReplyObject(rep);
    return count;
}

static int is_cancelled(rs_conn *r, const char *job_id)
{
    redisReply *rep = rs_command(r, "EXISTS %s%s", K_CANCEL_PREFIX, job_id);
    int yes = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
    freeReplyObject(rep);
    return yes;
}

/* places queued jobs while free workers last */
static void place_jobs(rs_conn *r, sched_queue *q, registry *reg)
{
    if (q->len == 0 || registry_refresh(r, reg) != 0) return;
    int next_free = 0;
    long i;
    while ((i = sq_next(q)) >= 0) {
        sched_entry *e = &q->items[i];
        if (is_cancelled(r, e->task.job_id)) {
            log_info("job %s was cancelled before placement", e->task.job_id);
            dispatch_drop(r, e->entry_id);
            sq_remove(q, (size_t)i);
            continue;
        }
        while (next_free < reg->n && !reg->w[next_free].free)
            next_free++;
        if (next_free >= reg->n) return; /* no capacity: the job waits, unacknowledged */
        reg_worker *w = &reg->w[next_free];
        dispatch_result res = dispatch_to(r, e, w->id);
        if (res == DISPATCH_ERROR) return;
        if (res == DISPATCH_OK) {
            log_info("job %s (attempt %d) -> worker %s", e->task.job_id, e->task.attempt, w->id);
            w->free = 0;
        } else {
            log_info("job %s attempt %d was already placed; duplicate publication acknowledged", e->task.job_id, e->task.attempt);
        }
        sq_remove(q, (size_t)i);
    }
}

int main(int argc, char **argv)
{
    log_init("scheduler");
    int rc =
        config_parse(argc, argv, opts, NOPTS, "gantry-scheduler", "Places jobs from gantry:jobs on free workers (see DESIGN.md).");
    if (rc != 0) return rc < 0 ? 2 : 0;
    if (strcmp(OPT("log-level"), "debug") == 0) log_set_level(LOG_DEBUG);
    rs_conn r;
    if (rs_init(&r, OPT("redis"), OPT("redis-password")) != 0) {
        log_error("--redis must be host:port");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    static registry reg;
    sched_queue q;
    sq_init(&q);
    int backlog = 1;
    char last[64] = "0";
    log_info("started; redis %s", OPT("redis"));
    while (!stopping) {
        if (!rs_ensure(&r)) {
            usleep(100000);
            backlog = 1; /* after an outage, re-read our pending entries */
            continue;
        }
        if (backlog) {
            ensure_group(&r);
            sq_free(&q);
            snprintf(last, sizeof(last), "0");
            int n;
            while ((n = read_jobs(&r, OPT("name"), &q, last, 0, last)) > 0)
                ;
            if (n < 0) continue;
            backlog = 0;
            log_info("recovered %zu unplaced jobs from the stream", q.len);
        }
        /* wait briefly while jobs wait for a worker, long when idle (new entries wake us at once) */
        if (read_jobs(&r, OPT("name"), &q, ">", q.len ? 50 : 1000, last) < 0) {
            backlog = 1;
            continue;
        }
        place_jobs(&r, &q, &reg);
    }
    log_info("stopped (%zu jobs left unplaced, still pending in the stream)", q.len);
    sq_free(&q);
    rs_close(&r);
    return 0;
}
