/* autoscale_sim.c - the discrete-event simulator of inference jobs on a fixed cluster, pure (autoscale_sim.h). */
#include "scheduler/autoscale/autoscale_sim.h"
#include "common/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LAT_WINDOW_S 30.0

enum { EV_ARRIVAL, EV_DONE, EV_READY, EV_TICK };
enum { R_FREE, R_STARTING, R_READY, R_DRAINING };

typedef struct {
    double t;
    int type, job, rep;
    unsigned gen;
} event;

typedef struct {
    int state;
    unsigned gen;   /* bumped when the slot is reused or cancelled: stale events are ignored */
    int busy;       /* serving a request */
    double arrived; /* that request's arrival time */
} replica;

typedef struct {
    uint64_t rng;
    int minute;    /* of the next arrival */
    double *queue; /* arrival times, a ring of queue_limit */
    int qhead, qlen;
    replica *reps;
    int nreps; /* slots in reps used so far */
    double arrivals_tick;
    double *lat_t, *lat_v; /* completions of the last LAT_WINDOW_S: time, latency (a ring) */
    int lat_head, lat_len, lat_cap;
} jobsim;

typedef struct {
    const sim_config *c;
    event *heap;
    int nheap, capheap;
    jobsim *js;
    double used_slots;
    long *met, *total; /* per (minute, job) */
    sim_result r;
} sim;

/* ---- random numbers (splitmix64) ---- */

static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double uniform(uint64_t *s)
{
    return ((next_u64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double normal(uint64_t *s)
{
    return sqrt(-2 * log(uniform(s))) * cos(6.283185307179586 * uniform(s));
}

/* ---- the event heap ---- */

static void push(sim *S, event e)
{
    if (S->nheap == S->capheap) {
        S->capheap = S->capheap ? 2 * S->capheap : 256;
        S->heap = xrealloc(S->heap, sizeof(event) * (size_t)S->capheap);
    }
    int i = S->nheap++;
    while (i > 0 && S->heap[(i - 1) / 2].t > e.t) {
        S->heap[i] = S->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    S->heap[i] = e;
}

static event pop(sim *S)
{
    event top = S->heap[0], last = S->heap[--S->nheap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= S->nheap) break;
        if (c + 1 < S->nheap && S->heap[c + 1].t < S->heap[c].t) c++;
        if (S->heap[c].t >= last.t) break;
        S->heap[i] = S->heap[c];
        i = c;
    }
    if (S->nheap > 0) S->heap[i] = last;
    return top;
}

/* ---- jobs ---- */

static double service_time(sim *S, jobsim *J, int j)
{
    double p = S->c->jobs[j].p, cv = S->c->service_cv;
    if (cv <= 0) return p;
    double s2 = log(1 + cv * cv);
    return exp(log(p) - s2 / 2 + sqrt(s2) * normal(&J->rng));
}

/* the next arrival of job j at or after t (Poisson within each minute) */
static void schedule_arrival(sim *S, int j, double t)
{
    jobsim *J = &S->js[j];
    for (;;) {
        if (J->minute >= S->c->minutes) return;
        double end = 60.0 * (J->minute + 1), rate = S->c->counts[(size_t)J->minute * S->c->njobs + j] / 60.0;
        if (t < 60.0 * J->minute) t = 60.0 * J->minute;
        if (rate > 0) {
            double next = t - log(uniform(&J->rng)) / rate;
            if (next < end) {
                push(S, (event){next, EV_ARRIVAL, j, 0, 0});
                return;
            }
        }
        J->minute++, t = end; /* memoryless: start over in the next minute */
    }
}

static void outcome(sim *S, int j, double arrived, int ok, int dropped)
{
    int m = (int)(arrived / 60.0);
    if (m < S->c->warmup || m >= S->c->minutes) return;
    S->r.requests++;
    if (!ok) S->r.violations++;
    if (dropped) S->r.drops++;
    size_t k = (size_t)m * S->c->njobs + j;
    S->total[k]++;
    if (ok) S->met[k]++;
}

static void start(sim *S, int j, int r, double now, double arrived)
{
    replica *R = &S->js[j].reps[r];
    R->busy = 1, R->arrived = arrived;
    push(S, (event){now + service_time(S, &S->js[j], j), EV_DONE, j, r, R->gen});
}

static void serve_next(sim *S, int j, int r, double now)
{
    jobsim *J = &S->js[j];
    if (J->qlen == 0) return;
    double a = J->queue[J->qhead];
    J->qhead = (J->qhead + 1) % S->c->queue_limit, J->qlen--;
    start(S, j, r, now, a);
}

static void on_arrival(sim *S, int j, double now)
{
    jobsim *J = &S->js[j];
    J->arrivals_tick++;
    schedule_arrival(S, j, now);
    for (int r = 0; r < J->nreps; r++)
        if (J->reps[r].state == R_READY && !J->reps[r].busy) {
            start(S, j, r, now, now);
            return;
        }
    if (J->qlen >= S->c->queue_limit) {
        outcome(S, j, now, 0, 1);
        return;
    }
    J->queue[(J->qhead + J->qlen) % S->c->queue_limit] = now;
    J->qlen++;
}

static void record_latency(jobsim *J, double now, double lat)
{
    if (J->lat_len == J->lat_cap) { /* grow the ring */
        int cap = J->lat_cap ? 2 * J->lat_cap : 256;
        double *t = xmalloc(sizeof(double) * (size_t)cap), *v = xmalloc(sizeof(double) * (size_t)cap);
        for (int i = 0; i < J->lat_len; i++)
            t[i] = J->lat_t[(J->lat_head + i) % J->lat_cap], v[i] = J->lat_v[(J->lat_head + i) % J->lat_cap];
        free(J->lat_t), free(J->lat_v);
        J->lat_t = t, J->lat_v = v, J->lat_head = 0, J->lat_cap = cap;
    }
    int k = (J->lat_head + J->lat_len) % J->lat_cap;
    J->lat_t[k] = now, J->lat_v[k] = lat;
    J->lat_len++;
}

static void on_done(sim *S, int j, int r, double now)
{
    jobsim *J = &S->js[j];
    replica *R = &J->reps[r];
    double lat = now - R->arrived;
    outcome(S, j, R->arrived, lat <= S->c->jobs[j].slo_s, 0);
    record_latency(J, now, lat);
    R->busy = 0;
    if (R->state == R_DRAINING) {
        R->state = R_FREE, R->gen++;
        S->used_slots -= S->c->jobs[j].cost;
        return;
    }
    serve_next(S, j, r, now);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double window_latency(jobsim *J, double now, double q, double *scratch)
{
    while (J->lat_len > 0 && J->lat_t[J->lat_head] < now - LAT_WINDOW_S)
        J->lat_head = (J->lat_head + 1) % J->lat_cap, J->lat_len--;
    if (J->lat_len <= 0) return 0;
    for (int i = 0; i < J->lat_len; i++)
        scratch[i] = J->lat_v[(J->lat_head + i) % J->lat_cap];
    qsort(scratch, (size_t)J->lat_len, sizeof(double), cmpd);
    return scratch[(int)fmin(J->lat_len - 1, ceil(q * J->lat_len) - 1)];
}

/* moves job j toward `target` replicas (not counting draining ones) */
static void actuate(sim *S, int j, int target, double now)
{
    jobsim *J = &S->js[j];
    double cost = S->c->jobs[j].cost;
    int live = 0;
    for (int r = 0; r < J->nreps; r++)
        live += J->reps[r].state == R_STARTING || J->reps[r].state == R_READY;
    for (; live < target && S->used_slots + cost <= S->c->capacity + 1e-9; live++) {
        int r = 0;
        while (r < J->nreps && J->reps[r].state != R_FREE)
            r++;
        if (r == J->nreps) J->nreps++;
        replica *R = &J->reps[r];
        R->state = R_STARTING, R->busy = 0, R->gen++;
        S->used_slots += cost;
        push(S, (event){now + S->c->cold_start_s, EV_READY, j, r, R->gen});
    }
    /* removal order: starting ones, then idle ones, then busy ones drain */
    for (int pass = 0; pass < 3 && live > target; pass++)
        for (int r = J->nreps - 1; r >= 0 && live > target; r--) {
            replica *R = &J->reps[r];
            int pick = pass == 0 ? R->state == R_STARTING : pass == 1 ? R->state == R_READY && !R->busy : R->state == R_READY;
            if (!pick) continue;
            live--;
            if (R->state == R_READY && R->busy) {
                R->state = R_DRAINING;
            } else {
                R->state = R_FREE, R->gen++;
                S->used_slots -= cost;
            }
        }
}

int sim_run(const sim_config *c, const char *policy, const as_params *prm, sim_result *out)
{
    as_params known = *prm; /* the simulator knows the truth: "+oracle" policies read it */
    known.oracle = c->counts, known.oracle_minutes = c->minutes;
    as_policy *pol = as_policy_create(policy, c->njobs, c->jobs, &known);
    if (!pol) return -1;
    sim S = {.c = c};
    memset(out, 0, sizeof(*out));
    S.js = xcalloc((size_t)c->njobs, sizeof(jobsim));
    S.met = xcalloc((size_t)c->minutes * c->njobs, sizeof(long));
    S.total = xcalloc((size_t)c->minutes * c->njobs, sizeof(long));
    int maxreps = (int)c->capacity + 2;
    for (int j = 0; j < c->njobs; j++) {
        jobsim *J = &S.js[j];
        J->rng = c->seed * 0x100000001B3ULL + (uint64_t)j * 0x9E3779B97F4A7C15ULL + 1;
        J->queue = xmalloc(sizeof(double) * (size_t)c->queue_limit);
        J->reps = xcalloc((size_t)maxreps * 2, sizeof(replica)); /* draining ones may outlive their slot's reuse */
        schedule_arrival(&S, j, 0);
    }
    as_obs *obs = xcalloc((size_t)c->njobs, sizeof(as_obs));
    int *target = xcalloc((size_t)c->njobs, sizeof(int));
    double *scratch = NULL;
    int scratch_cap = 0;
    long ticks = 0;
    double *solver = NULL;
    push(&S, (event){0, EV_TICK, 0, 0, 0});
    double end = 60.0 * c->minutes, last_tick = 0;
    while (S.nheap > 0) {
        event e = pop(&S);
        if (e.t > end) break;
        if (e.type == EV_ARRIVAL) {
            on_arrival(&S, e.job, e.t);
        } else if (e.type == EV_DONE) {
            if (S.js[e.job].reps[e.rep].gen == e.gen || S.js[e.job].reps[e.rep].state == R_DRAINING) on_done(&S, e.job, e.rep, e.t);
        } else if (e.type == EV_READY) {
            replica *R = &S.js[e.job].reps[e.rep];
            if (R->gen == e.gen && R->state == R_STARTING) {
                R->state = R_READY;
                serve_next(&S, e.job, e.rep, e.t);
            }
        } else { /* the policy's tick */
            for (int j = 0; j < c->njobs; j++) {
                jobsim *J = &S.js[j];
                as_obs *o = &obs[j];
                memset(o, 0, sizeof(*o));
                o->arrivals = J->arrivals_tick, J->arrivals_tick = 0;
                for (int r = 0; r < J->nreps; r++) {
                    o->ready += J->reps[r].state == R_READY;
                    o->starting += J->reps[r].state == R_STARTING;
                    o->in_service += J->reps[r].busy;
                }
                o->queued = J->qlen;
                if (J->lat_len > scratch_cap) {
                    scratch_cap = J->lat_len * 2;
                    scratch = xrealloc(scratch, sizeof(double) * (size_t)scratch_cap);
                }
                o->latency_s = window_latency(J, e.t, c->jobs[j].slo_q, scratch);
            }
            as_policy_tick(pol, e.t, c->capacity, obs, target);
            if (e.t >= 60.0 * c->warmup) {
                solver = xrealloc(solver, sizeof(double) * (size_t)(ticks + 1));
                solver[ticks++] = as_policy_last_ms(pol);
            }
            if (last_tick >= 60.0 * c->warmup) out->replica_minutes += S.used_slots * (e.t - last_tick) / 60.0;
            last_tick = e.t;
            for (int j = 0; j < c->njobs; j++)
                actuate(&S, j, target[j], e.t);
            push(&S, (event){e.t + AS_TICK_S, EV_TICK, 0, 0, 0});
        }
    }
    /* requests still waiting at the end count against the SLO only if they already missed it */
    for (int j = 0; j < c->njobs; j++) {
        jobsim *J = &S.js[j];
        for (int k = 0; k < J->qlen; k++) {
            double a = J->queue[(J->qhead + k) % c->queue_limit];
            if (end - a > c->jobs[j].slo_s) outcome(&S, j, a, 0, 0);
        }
    }
    out->requests = S.r.requests, out->violations = S.r.violations, out->drops = S.r.drops;
    out->violation_rate = S.r.requests ? (double)S.r.violations / S.r.requests : 0;
    out->drop_rate = S.r.requests ? (double)S.r.drops / S.r.requests : 0;
    double lost = 0;
    long cells = 0;
    for (int m = c->warmup; m < c->minutes; m++)
        for (int j = 0; j < c->njobs; j++, cells++) {
            size_t k = (size_t)m * c->njobs + j;
            if (S.total[k]) lost += 1.0 - (double)S.met[k] / S.total[k];
        }
    out->lost_utility = cells ? lost / cells : 0;
    if (ticks) {
        double sum = 0;
        for (long i = 0; i < ticks; i++)
            sum += solver[i], out->solver_ms_max = fmax(out->solver_ms_max, solver[i]);
        out->solver_ms_mean = sum / ticks;
        qsort(solver, (size_t)ticks, sizeof(double), cmpd);
        out->solver_ms_p99 = solver[(long)fmin(ticks - 1, ceil(0.99 * ticks) - 1)];
    }
    for (int j = 0; j < c->njobs; j++) {
        free(S.js[j].queue), free(S.js[j].reps), free(S.js[j].lat_t), free(S.js[j].lat_v);
    }
    free(S.js), free(S.met), free(S.total), free(S.heap), free(obs), free(target), free(scratch), free(solver);
    as_policy_free(pol);
    return 0;
}
