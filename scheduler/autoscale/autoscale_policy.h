/* autoscale_policy.h - the autoscaling policies behind one interface, pure.
 *
 * The scheduler (live) and gantry-autoscale-sim (offline) run the same code:
 * create a policy for a set of inference jobs, then call as_policy_tick every
 * tick (AS_TICK_S) with what was observed since the previous tick and the
 * capacity this tier may use (the slots that higher-priority work leaves); it
 * writes a target replica count per job, always within [min, max] and, in
 * total, within the capacity (when the minimums alone exceed it, the
 * minimums).  Actuation (start replicas, drain before removing, count warm-up)
 * is the caller's.
 *
 * Policies (as_policy_names):
 *   faro-fairsum, faro-sum, faro-fair  Faro: every control period (300 s) a
 *       probabilistic forecast of the next 7 minutes at quantile `quantile`
 *       and the cluster-wide solve of faro.h; between rounds a reactive loop:
 *       +1 replica for a job whose observed latency stayed above its SLO for
 *       30 s (when a slot is free).  For the ablation a Faro name takes
 *       modifiers: "+oracle" forecasts the true rates (as_params.oracle),
 *       "+greedy", "+exact", "+relaxed" solve with FARO_GREEDY, FARO_EXACT,
 *       FARO_RELAXED instead of as_params.method, "+holt", "+seasonal" forecast with
 *       that predictor instead of as_params.predictor, e.g. "faro-fairsum+oracle+exact".
 *   fairshare  capacity / N to each job.
 *   oneshot    Kubernetes HPA on latency: x <- ceil(x L / T) after 30 s above
 *              the SLO, or after 600 s below it.
 *   hpa        Kubernetes HPA with its defaults on the latency metric: every
 *              15 s x <- ceil(x L / T) unless within 10% of the target; up at
 *              once, down only to the largest recommendation of the last 300 s.
 *   aiad       +1 after 30 s above the SLO, -1 after 600 s below half of it.
 *   mark       MArk/Cocktail-like: every 300 s, ceil(max point forecast * p / T)
 *              (and at least the load), plus the reactive +1.
 *   ray-serve  Ray Serve: ongoing requests (queued + in service) averaged over
 *              30 s / target_ongoing_requests (2); up after 30 s, down after 600 s.
 *   kpa        Knative KPA: a 2 s tick, concurrency per replica target 1 at 70%,
 *              60 s stable and 6 s panic windows, panic when the panic window
 *              wants >= 2x the ready replicas (no scale-down while panicking).
 */
#ifndef GANTRY_AUTOSCALE_POLICY_H
#define GANTRY_AUTOSCALE_POLICY_H

#define AS_TICK_S 2.0 /* every policy is called this often; each keeps its own slower clocks */

typedef struct {
    double p;      /* mean processing time of one request on one replica (s) */
    double slo_s;  /* latency target (s) */
    double slo_q;  /* at this percentile, e.g. 0.99 */
    double weight; /* Faro-Sum weight (1) */
    double cost;   /* slots per replica (1) */
    int min, max;  /* replica bounds */
} as_job;

/* what happened to one job since the previous tick */
typedef struct {
    double arrivals;  /* requests that arrived */
    int ready;        /* replicas serving */
    int starting;     /* replicas warming up (cold start) */
    int queued;       /* requests waiting now */
    int in_service;   /* requests being served now */
    double latency_s; /* latency at the job's percentile over the last 30 s of completions (0: none) */
} as_obs;

typedef struct {
    double quantile;  /* Faro's forecast quantile (0.8) */
    int period_min;   /* seasonal period of the load in minutes (0: none) */
    double control_s; /* Faro / MArk control period (300) */
    int method;       /* faro_method of Faro's solve (0: FARO_AUTO) */
    /* the truth, for "+oracle" (NULL otherwise): oracle[m * njobs + j] requests of job j in minute m, which
     * covers now_s in [60 m, 60 m + 60), for m < oracle_minutes */
    const double *oracle;
    int oracle_minutes;
    int predictor;       /* as_predictor of Faro's forecast (0: AS_PRED_DEFAULT) */
    double drop_penalty; /* Faro's optional drop-rate term (faro_model.h; 0: off) */
} as_params;

/* Faro's forecaster: Holt's smoothing with a seasonal blend (predict.h) or the seasonal quantile
 * forecaster (predict_quantile.h); both read at as_params.quantile */
typedef enum { AS_PRED_DEFAULT = 0, AS_PRED_HOLT, AS_PRED_SEASONAL } as_predictor;
#define AS_PRED_DEFAULT_IS AS_PRED_SEASONAL /* what AS_PRED_DEFAULT means */
/* "holt", "seasonal" -> as_predictor; -1 when unknown */
int as_predictor_parse(const char *name);

typedef struct as_policy as_policy;

extern const char *const as_policy_names[]; /* NULL-terminated */

/* NULL when the name is unknown (or "+oracle" without as_params.oracle) */
as_policy *as_policy_create(const char *name, int njobs, const as_job *jobs, const as_params *params);
/* now_s: seconds since any fixed origin, increasing by about AS_TICK_S */
void as_policy_tick(as_policy *p, double now_s, double capacity, const as_obs *obs, int *target);
/* updates job i's description (e.g. a measured processing time) */
void as_policy_set_job(as_policy *p, int i, const as_job *job);
/* time spent in the solver (Faro) or decision (others) of each tick, ms */
double as_policy_last_ms(const as_policy *p);
void as_policy_free(as_policy *p);

/* Inference replicas yield to a job waiting for workers (scheduler/policy.h, rule 6; pure).
 * prio[i] is job i's priority, claim_priority the waiting job's (-1: no claim), give the replicas it
 * asks for, target[i] the policy's target for job i, changed in place: a job of priority
 * claim_priority or lower grows no further than its live replicas (ready + starting), and such jobs
 * give back up to `give` replicas in all, one at a time from the job with the most to spare, never
 * below their minimum nor below the replicas their SLO needs at the rate they see now (the latency
 * model of latency.h; a job over its SLO now gives nothing).  Returns how many were given back. */
int as_yield(const as_job *jobs, const as_obs *obs, const int *prio, int n, int claim_priority, int give, int *target);

#endif
