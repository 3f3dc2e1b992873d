/* autoscaler.h - the scheduler's live loop for inference replicas.
 *
 * Every AS_TICK_S the leader reads the inference jobs (gantry:infer:jobs), their
 * replicas (workers running, or about to run, the job's task: registry.h), and
 * what happened since the last tick (arrivals counted by the servers, the queue
 * length, the servers' latency window, the replicas' measured service time,
 * all in gantry:infer:*), asks the policy of autoscale/autoscale_policy.h (the code the
 * simulator runs) for targets within the capacity the inference tier may use
 * (every worker not running other work), and acts: a new replica is the job's
 * task pushed to a free worker (it serves after loading the model: its warm-up
 * is counted as "starting"); a removed replica is told to drain (it finishes
 * its batch, then stops).  Every change is an event on the job with the
 * policy, the target and why, and a metrics point with the replica count.
 * A cancelled job leaves the loop; the minimum replicas are restored if
 * replicas are lost. */
#ifndef GANTRY_SCHED_AUTOSCALER_H
#define GANTRY_SCHED_AUTOSCALER_H

#include "wire/redis_sync.h"
#include "scheduler/autoscale/autoscale_policy.h"
#include "scheduler/registry.h"

typedef struct autoscaler autoscaler;

/* NULL when the policy name is unknown */
autoscaler *autoscaler_create(const char *policy, const as_params *params);
/* runs one tick when AS_TICK_S has passed since the last (now: monotonic seconds); the
 * workers it gives a replica are marked in reg (registry_assign) */
void autoscaler_tick(autoscaler *a, rs_conn *r, registry *reg, double now);
void autoscaler_free(autoscaler *a);

#endif
