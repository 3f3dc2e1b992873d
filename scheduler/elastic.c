/* elastic.c - growing and shrinking elastic training gangs (elastic.h). */
#include "scheduler/elastic.h"
#include "common/alloc.h"
#include "wire/keys.h"
#include "common/log.h"
#include "wire/msg.h"
#include "wire/requeue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TRACKED 256

typedef struct {
    char job[48];
    double at; /* the job's last resize request (or the first time it was seen running) */
} tracked;

struct elastic {
    tracked t[MAX_TRACKED];
    int n;
    double last;
};

elastic *elastic_create(void)
{
    return xcalloc(1, sizeof(elastic));
}

void elastic_free(elastic *e)
{
    free(e);
}

static tracked *track(elastic *e, const char *job, double now)
{
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->t[i].job, job) == 0) return &e->t[i];
    if (e->n == MAX_TRACKED) e->n = 0; /* forget the oldest entries */
    tracked *t = &e->t[e->n++];
    snprintf(t->job, sizeof(t->job), "%s", job);
    t->at = now; /* a newly seen gang settles first */
    return t;
}

static void note(rs_conn *r, const char *job, const char *reason)
{
    event_msg ev;
    msg_event_init(&ev, job, "scheduler");
    snprintf(ev.reason, sizeof(ev.reason), "%s", reason);
    char *s = msg_event_encode(&ev);
    /* a lost event is a line less in the job's history, not a failure: rs_do logged it */
    if (s) rs_do(r, "XADD %s MAXLEN ~ %d * %s %s", K_EVENTS_STREAM, K_STREAM_MAXLEN, F_EVENT, s);
    free(s);
}

void elastic_tick(elastic *e, rs_conn *r, const registry *reg, size_t queued, double now)
{
    if (now - e->last < 1.0) return;
    e->last = now;
    int free_workers = 0;
    for (int w = 0; w < reg->n; w++)
        free_workers += reg->w[w].free;
    redisReply *rep = rs_command(r, "HGETALL %s", K_ELASTIC);
    for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i + 1 < rep->elements; i += 2) {
        const char *job = rep->element[i]->str;
        int max = atoi(rep->element[i + 1]->str), running = 0, started = 0, attempt = 0;
        for (int w = 0; w < reg->n; w++)
            if (strcmp(reg->w[w].job_id, job) == 0) running++, started += reg->w[w].started, attempt = reg->w[w].attempt;
        if (running == 0) continue; /* queued, resizing or finished */
        tracked *t = track(e, job, now);
        if (queued > 0 || free_workers == 0 || running >= max || started < running || now - t->at < ELASTIC_SETTLE_S) continue;
        if (requeue_ask(r, job, attempt, "resize") != 1) continue;
        t->at = now;
        char why[200];
        int to = running + free_workers < max ? running + free_workers : max;
        snprintf(why, sizeof(why), "resize: %d worker%s free; growing from %d toward %d (max %d)", free_workers,
                 free_workers == 1 ? "" : "s", running, to, max);
        note(r, job, why);
        log_info("job %s: %s", job, why);
        free_workers -= to - running;
    }
    freeReplyObject(rep);
}
