/* autoscale_sim.h - a discrete-event simulator of inference jobs on a fixed cluster, pure.
 *
 * Replays per-minute request counts (the trace format of data/traces/) as
 * Poisson arrivals within each minute; every job has a FIFO queue (limit:
 * further arrivals are dropped) and replicas that serve one request at a time
 * with a given service-time distribution (deterministic, or lognormal with a
 * coefficient of variation); a new replica serves after a cold start; a removed
 * replica first finishes its request (drain).  Every AS_TICK_S the policy of
 * autoscale_policy.h (the very code the scheduler runs) sees the observations and sets
 * targets within the capacity.
 *
 * Measured from minute `warmup` on (earlier minutes only feed the predictors):
 * SLO violation rate (requests slower than their SLO or dropped / requests),
 * lost utility (1 - the fraction of a job's requests within SLO, averaged over
 * jobs and minutes), drop rate, replica-minutes (starting and draining
 * included) and the policy's time per tick. */
#ifndef GANTRY_AUTOSCALE_SIM_H
#define GANTRY_AUTOSCALE_SIM_H

#include <stdint.h>

#include "scheduler/autoscale/autoscale_policy.h"

typedef struct {
    int njobs, minutes;
    const double *counts; /* counts[m * njobs + j]: requests arriving in minute m */
    const as_job *jobs;
    double capacity;     /* slots */
    double cold_start_s; /* a new replica serves after this long (10) */
    int queue_limit;     /* waiting requests per job (1000) */
    double service_cv;   /* 0: deterministic service times */
    int warmup;          /* minutes replayed before measuring */
    uint64_t seed;
} sim_config;

typedef struct {
    long requests, violations, drops;
    double violation_rate, lost_utility, drop_rate, replica_minutes;
    double solver_ms_mean, solver_ms_p99, solver_ms_max;
} sim_result;

/* 0, or -1 when the policy name is unknown */
int sim_run(const sim_config *c, const char *policy, const as_params *prm, sim_result *out);

#endif
