/* registry.c - the scheduler's view of the workers, read from Redis each round (registry.h). */
#include "scheduler/registry.h"
#include "common/jobtypes.h"
#include "wire/keys.h"
#include "common/log.h"
#include "wire/msg.h"
#include "wire/requeue.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static void hold(reg_worker *w, const task_msg *t, bool started)
{
    w->free = false;
    w->started = started;
    snprintf(w->job_id, sizeof(w->job_id), "%s", t->job_id);
    w->attempt = t->attempt;
    snprintf(w->tenant, sizeof(w->tenant), "%s", t->tenant);
    w->priority = t->priority;
    w->preemptible = t->preemptible;
    w->serving = (job_type_traits(t->type) & JT_SERVING) != 0;
    w->serving_min = w->serving ? t->slots : 0; /* an inference job's slots are its minimum replicas */
}

/* fills what a busy worker runs from the task at the head of one of its lists */
static void read_task(reg_worker *w, redisReply *list, bool started)
{
    if (list->type != REDIS_REPLY_ARRAY || list->elements == 0) return;
    w->free = false;
    if (w->job_id[0]) return;
    task_msg t;
    if (msg_task_decode(list->element[0]->str, &t) != 0) return;
    hold(w, &t, started);
    msg_task_clear(&t);
}

void registry_assign(registry *reg, int w, const task_msg *t)
{
    if (w >= 0 && w < reg->n && reg->w[w].free) hold(&reg->w[w], t, false);
}

static void fill(reg_worker *w, const char *id, redisReply *info, redisReply *inflight, redisReply *tasks)
{
    memset(w, 0, sizeof(*w));
    snprintf(w->id, sizeof(w->id), "%s", id);
    json_t *j = json_loads(info->str, 0, NULL);
    const char *kind = json_string_value(json_object_get(j, "kind"));
    snprintf(w->kind, sizeof(w->kind), "%s", kind ? kind : "cpu");
    const char *site = json_string_value(json_object_get(json_object_get(j, "labels"), "site"));
    snprintf(w->site, sizeof(w->site), "%s", site ? site : "");
    const char *key = json_string_value(json_object_get(j, "site_key"));
    snprintf(w->site_key, sizeof(w->site_key), "%s", key ? key : "");
    json_decref(j);
    w->free = true;
    read_task(w, inflight, true);
    read_task(w, tasks, false);
}

int registry_refresh(rs_conn *r, registry *reg)
{
    redisReply *ids = rs_command(r, "SMEMBERS %s", K_WORKERS_SET);
    if (!ids || ids->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(ids);
        return -1;
    }
    size_t n = ids->elements < REG_MAX_WORKERS ? ids->elements : REG_MAX_WORKERS;
    for (size_t i = 0; i < n; i++) {
        const char *id = ids->element[i]->str;
        redisAppendCommand(r->c, "HGET %s%s info", K_WORKER_PREFIX, id);
        redisAppendCommand(r->c, "LRANGE %s%s -1 -1", K_INFLIGHT_PREFIX, id);
        redisAppendCommand(r->c, "LRANGE %s%s -1 -1", K_TASKS_PREFIX, id);
    }
    reg->n = 0;
    reg->claim = (pol_claim){-1, 0, NULL};
    int rc = 0;
    char lost[64][64];
    int nlost = 0;
    for (size_t i = 0; i < n; i++) {
        static const char *const cmd[3] = {"HGET", "LRANGE", "LRANGE"};
        redisReply *rep[3] = {NULL, NULL, NULL};
        for (int k = 0; k < 3; k++)
            if (rc == 0 && !(rep[k] = rs_get_reply(r, cmd[k]))) rc = -1; /* the connection is dropped */
        const char *id = ids->element[i]->str;
        if (rc == 0 && rep[0]->type == REDIS_REPLY_NIL && nlost < 64)
            snprintf(lost[nlost++], sizeof(lost[0]), "%s", id);
        else if (rc == 0 && rep[0]->type == REDIS_REPLY_STRING)
            fill(&reg->w[reg->n++], id, rep[0], rep[1], rep[2]);
        for (int k = 0; k < 3; k++)
            freeReplyObject(rep[k]);
    }
    freeReplyObject(ids);
    if (rc != 0) return -1;
    for (int i = 0; i < nlost; i++) {
        char why[160];
        snprintf(why, sizeof(why), "worker %.63s lost (no heartbeat for %d ms)", lost[i], K_WORKER_TTL_MS);
        log_warn("%s", why);
        requeue_worker_tasks(r, lost[i], reg->max_attempts, why);
    }
    return 0;
}
