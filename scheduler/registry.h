/* registry.h - the scheduler's view of workers, read from Redis (keys.h) each round:
 * which are alive (their hash exists), which are free (nothing in their task or
 * in-flight lists) and, for busy ones, what they run (tenant, priority, whether it
 * may be preempted).  A worker whose hash expired is gone: its work is given back
 * (requeue.h) and it leaves the registry. */
#ifndef GANTRY_SCHED_REGISTRY_H
#define GANTRY_SCHED_REGISTRY_H

#include <stdbool.h>

#include "wire/msg.h"
#include "wire/redis_sync.h"
#include "scheduler/policy.h"

#define REG_MAX_WORKERS 4096

typedef struct {
    char id[64];
    char kind[8];      /* cpu | gpu */
    char site[64];     /* its label site=NAME ("" none): where a federated job's site runs */
    char site_key[64]; /* its federated identity's public key (ed25519:..., "" none): the sites pinned to it run here */
    bool free;
    /* what it runs (when not free): started when the task is in its in-flight list, not only queued for it */
    bool started;
    char job_id[48];
    int attempt; /* its generation (the task's attempt) */
    char tenant[48];
    int priority;
    bool preemptible;
    bool serving;    /* it runs a replica of an inference job (which serves until cancelled) */
    int serving_min; /* that job's minimum replicas */
} reg_worker;

typedef struct {
    reg_worker w[REG_MAX_WORKERS];
    int n;
    int max_attempts; /* for the work of lost workers */
    /* what the round's first job waiting for capacity asks of the inference tier (policy.h): set by
     * the scheduling round, read by the autoscaler, cleared by registry_refresh */
    pol_claim claim;
} registry;

/* refreshes the list (and clears the claim); 0, or -1 when Redis is unreachable */
int registry_refresh(rs_conn *r, registry *reg);

/* records a task this process has just put in worker w's list, so that what runs later
 * in the same round (the autoscaler, elastic resizes) never gives that slot away twice */
void registry_assign(registry *reg, int w, const task_msg *t);

#endif
