/* policy.h - who runs next.  A pure function (no Redis, no clock) from the queued
 * jobs, the workers and the tenants to decisions, so the rules can be tested alone.
 *
 * The rules, in order:
 *  1. Priority classes first (high, normal, low): a higher class is always
 *     considered before a lower one.
 *  2. Within a class, weighted fair share: the tenant with the fewest slots in use
 *     per unit of weight goes next (recomputed after every placement); within a
 *     tenant, arrival order.
 *  3. Quotas: a tenant at max_slots places nothing more (its jobs wait, "quota").
 *  4. Gangs: a job needing N slots gets N free workers at once or none.  An
 *     elastic gang (max_slots > slots) also gets workers left over once no job
 *     of the round waits for capacity, up to max_slots.  A job that cannot be
 *     placed for lack of capacity is one of:
 *     - impossible: a gang needing more workers than the cluster has.  It waits,
 *       saying so (add workers or cancel it), and holds nothing back;
 *     - blocked: even when every running job that ends by itself has ended and
 *       every inference job of its priority or lower has given back what it may
 *       (replicas above its minimum), too few workers would be free: the rest
 *       serve inference jobs at their minimum, or of a higher priority.  It waits
 *       naming that job and what unblocks it (cancel it, add a worker) and holds
 *       nothing back: holding workers for it would only idle them;
 *     - reserved (the first such job in the order): it holds the free workers.
 *       Behind it only short jobs (placement) may take them -- backfill: the gang
 *       still waits for busy workers, so a job of seconds does not delay it.
 *  5. Preemption: a job that cannot be placed may take workers running jobs of a
 *     strictly lower priority that were submitted as preemptible (lowest priority,
 *     then newest first); it waits for them to be released and keeps its reservation.
 *  6. Inference replicas yield: the first job that waits for capacity claims
 *     the workers it lacks (pol_claim): inference jobs of its priority or lower
 *     stop growing and give back replicas above their minimum while their SLO
 *     allows (autoscale/autoscale_policy.h, as_yield), so a waiting gang of equal or
 *     higher priority can start (or, when it is blocked, the jobs behind it run).
 *  Federated jobs: slot k goes to a free worker labelled site=sites[k], or, for a
 *  site that names no label (sites[k] NULL), to any free worker (unlabelled
 *  ones first), one slot per worker; a site pinned to an identity key
 *  (site_keys[k]) only to the worker that holds it.  A labelled or pinned site
 *  without a free worker makes the job wait naming the site, holding nothing
 *  back.
 * Every job that is not placed gets the reason it waits. */
#ifndef GANTRY_SCHED_POLICY_H
#define GANTRY_SCHED_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#define POL_MAX_GANG 64
#define POL_REASON_LEN 160

typedef struct {
    const char *id;
    double weight; /* > 0 */
    int max_slots; /* < 0: no quota */
} pol_tenant;

typedef struct {
    bool free;              /* alive and nothing assigned */
    const char *tenant;     /* of the job it runs; NULL when free */
    const char *job_id;     /* NULL when free */
    int priority;           /* of that job */
    bool preemptible;       /* that job may be preempted */
    unsigned long long seq; /* when it was assigned (larger: newer) */
    const char *site;       /* its site label, or NULL */
    bool serving;           /* that job is an inference job: its replicas serve until it is cancelled */
    int serving_min;        /* serving: the job's minimum replicas */
    const char *site_key;   /* the public key of its federated identity key (ed25519:...), or NULL */
} pol_worker;

typedef struct {
    const char *job_id;
    const char *tenant;
    int priority;             /* 0 low, 1 normal, 2 high */
    int slots;                /* 1..POL_MAX_GANG */
    int max_slots;            /* elastic gangs: up to this many when workers are left over (0: slots) */
    bool hold;                /* wait this round (an elastic generation gathering its predecessor's workers) */
    unsigned long long seq;   /* arrival order */
    const char *const *sites; /* federated: slot k only on a worker labelled site=sites[k], any worker when NULL
                                 (nsites = slots) */
    int nsites;
    bool brief;                   /* a short job (placement: seconds): it may backfill the workers a gang holds */
    const char *const *site_keys; /* federated: slot k only on the worker whose site_key is site_keys[k] (spec.sites[k].
                                     public_key), any when NULL (nsites entries; NULL: none) */
} pol_job;

typedef enum { POL_WAIT, POL_PLACE } pol_action;

typedef struct {
    pol_action action;
    int workers[POL_MAX_GANG]; /* POL_PLACE: indices into the workers array */
    int nworkers;
    char reason[POL_REASON_LEN]; /* POL_WAIT: why */
} pol_decision;

typedef struct {
    int worker;  /* index of the worker to release */
    int for_job; /* index of the job that takes it */
} pol_preemption;

/* What the first job waiting for capacity asks of the inference tier (rule 6). */
typedef struct {
    int priority;       /* of the job that claims; -1: no claim (the autoscaler may use every free worker) */
    int workers;        /* replicas inference jobs of this priority or lower should give back (when their SLO allows) */
    const char *job_id; /* the claiming job (NULL: none) */
} pol_claim;

/* Decides for every job (out[i] for jobs[i]); preemptions (at most nworkers) go to pre; the claim
 * on the inference tier to *claim (may be NULL).  Returns the number of jobs placed.  Workers marked
 * as placed are updated (free = false). */
int policy_decide_claim(const pol_job *jobs, int njobs, pol_worker *workers, int nworkers, const pol_tenant *tenants, int ntenants,
                        pol_decision *out, pol_preemption *pre, int *npre, pol_claim *claim);
/* the same without the claim */
int policy_decide(const pol_job *jobs, int njobs, pol_worker *workers, int nworkers, const pol_tenant *tenants, int ntenants,
                  pol_decision *out, pol_preemption *pre, int *npre);

#endif
