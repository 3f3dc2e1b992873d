/* registry.h - the scheduler's view of workers, read from Redis (keys.h):
 * which are alive (their hash exists) and which are free (nothing in their task
 * or in-flight lists).  Dead ids are pruned from gantry:workers. */
#ifndef GANTRY_SCHED_REGISTRY_H
#define GANTRY_SCHED_REGISTRY_H

#include "common/redis_sync.h"

#define REG_MAX_WORKERS 4096

typedef struct {
    char id[64];
    char kind[8]; /* cpu | gpu */
    int free;
} reg_worker;

typedef struct {
    reg_worker w[REG_MAX_WORKERS];
    int n;
} registry;

/* refreshes the list; 0, or -1 when Redis is unreachable */
int registry_refresh(rs_conn *r, registry *reg);

#endif
