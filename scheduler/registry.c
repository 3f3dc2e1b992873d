#include "scheduler/registry.h"
#include "common/keys.h"
#include "common/log.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

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
        redisAppendCommand(r->c, "LLEN %s%s", K_TASKS_PREFIX, id);
        redisAppendCommand(r->c, "LLEN %s%s", K_INFLIGHT_PREFIX, id);
    }
    reg->n = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        redisReply *rep[3] = {NULL, NULL, NULL};
        for (int k = 0; k < 3; k++)
            if (rc == 0 && redisGetReply(r->c, (void **)&rep[k]) != REDIS_OK) rc = -1;
        const char *id = ids->element[i]->str;
        if (rc == 0 && rep[0]->type == REDIS_REPLY_NIL) {
            /* no heartbeat within the TTL: gone (its in-flight work is requeued by the control-plane issue) */
            log_info("worker %s expired; removing it from the registry", id);
            freeReplyObject(redisCommand(r->c, "SREM %s %s", K_WORKERS_SET, id));
        } else if (rc == 0 && rep[0]->type == REDIS_REPLY_STRING) {
            reg_worker *w = &reg->w[reg->n++];
            snprintf(w->id, sizeof(w->id), "%s", id);
            json_t *info = json_loads(rep[0]->str, 0, NULL);
            snprintf(w->kind, sizeof(w->kind), "%s", json_string_value(json_object_get(info, "kind")) ?: "cpu");
            json_decref(info);
            w->free = rep[1]->type == REDIS_REPLY_INTEGER && rep[2]->type == REDIS_REPLY_INTEGER && rep[1]->integer == 0 &&
                      rep[2]->integer == 0;
        }
        for (int k = 0; k < 3; k++)
            freeReplyObject(rep[k]);
    }
    freeReplyObject(ids);
    if (rc != 0) rs_close(r);
    return rc;
}
