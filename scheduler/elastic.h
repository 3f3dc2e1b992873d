/* elastic.h - growing elastic training gangs ({"workers": {"min", "max"}}).
 *
 * A gang gets at least min workers and, when nobody else waits, the leftover
 * ones up to max (policy.h).  When workers become free later and nothing is
 * queued, the leader asks a running elastic gang below its max to resize:
 * the preemption key is set to "resize", every member stops at the same step
 * (a stop vote), rank 0 checkpoints, the job goes back to the queue as its next
 * generation and comes back with the workers it can get; its data state makes
 * the new world continue exactly where the old one stopped.  Shrinking is the
 * same path taken by preemption or a lost worker (the next generation gets at
 * least min).  At most one resize per job per ELASTIC_SETTLE_S. */
#ifndef GANTRY_SCHED_ELASTIC_H
#define GANTRY_SCHED_ELASTIC_H

#include "wire/redis_sync.h"
#include "scheduler/registry.h"

#include <stddef.h>

#define ELASTIC_SETTLE_S 5.0

typedef struct elastic elastic;

elastic *elastic_create(void);
/* one pass (every second or so): queued is the number of jobs waiting for placement */
void elastic_tick(elastic *e, rs_conn *r, const registry *reg, size_t queued, double now);
void elastic_free(elastic *e);

#endif
