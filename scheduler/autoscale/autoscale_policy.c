/* autoscale_policy.c - the autoscaling policies (Faro's variants and the baselines) behind one interface, pure
 * (autoscale_policy.h). */
#include "scheduler/autoscale/autoscale_policy.h"
#include "common/alloc.h"
#include "scheduler/autoscale/faro.h"
#include "scheduler/autoscale/latency.h"
#include "scheduler/autoscale/predict.h"
#include "scheduler/autoscale/predict_quantile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WINDOW 64        /* ticks of history kept per job (128 s) */
#define FARO_GROUP 32    /* jobs per group of the hierarchical solve */
#define UP_DELAY_S 30    /* sustained before scaling up */
#define DOWN_DELAY_S 600 /* sustained before scaling down */
#define HPA_SYNC_S 15    /* Kubernetes HPA: sync period, tolerance, scale-down stabilisation */
#define HPA_TOLERANCE 0.1
#define HPA_RECS 20 /* 300 s / 15 s */

typedef enum { P_FARO_FAIRSUM, P_FARO_SUM, P_FARO_FAIR, P_FAIRSHARE, P_ONESHOT, P_HPA, P_AIAD, P_MARK, P_RAY, P_KPA } kind;

const char *const as_policy_names[] = {"faro-fairsum", "faro-sum", "faro-fair", "fairshare", "oneshot", "hpa",
                                       "aiad",         "mark",     "ray-serve", "kpa",       NULL};

typedef struct {
    predictor pred;  /* Holt's: MArk's forecast, and Faro's with AS_PRED_HOLT */
    pq_predictor pq; /* Faro's with AS_PRED_SEASONAL */
    double minute_start, minute_arrivals;
    double last_rate;                                                /* arrivals per second over the last tick */
    double above_since, below_since, want_up_since, want_down_since; /* -1: not now */
    double panic_until;
    double conc[WINDOW], busy[WINDOW]; /* per tick: queued + in service, in service */
    int nsamples, head;
    int target;
    double hpa_last;
    int hpa_rec[HPA_RECS], hpa_n, hpa_head; /* HPA's recommendations of the last 300 s */
} job_state;

struct as_policy {
    kind k;
    int oracle; /* Faro forecasts the true rates (prm.oracle) */
    int n;
    as_job *jobs;
    job_state *st;
    as_params prm;
    double next_control, last_ms;
    int started;
};

static int is_faro(kind k)
{
    return k == P_FARO_FAIRSUM || k == P_FARO_SUM || k == P_FARO_FAIR;
}

int as_predictor_parse(const char *name)
{
    return !strcmp(name, "holt") ? AS_PRED_HOLT : !strcmp(name, "seasonal") ? AS_PRED_SEASONAL : -1;
}

as_policy *as_policy_create(const char *name, int njobs, const as_job *jobs, const as_params *params)
{
    int k = -1, oracle = 0;
    size_t base = strcspn(name, "+");
    for (int i = 0; as_policy_names[i]; i++)
        if (strlen(as_policy_names[i]) == base && strncmp(as_policy_names[i], name, base) == 0) k = i;
    if (k < 0 || njobs < 0) return NULL;
    as_params prm = params ? *params : (as_params){0.8, 0, 300, FARO_AUTO, NULL, 0, AS_PRED_DEFAULT, 0};
    for (const char *m = name + base; *m == '+'; m += 1 + strcspn(m + 1, "+")) { /* the ablation's modifiers */
        size_t len = strcspn(m + 1, "+");
        if (!is_faro((kind)k)) return NULL;
        if (len == 6 && strncmp(m + 1, "oracle", 6) == 0 && prm.oracle)
            oracle = 1;
        else if (len == 5 && strncmp(m + 1, "exact", 5) == 0)
            prm.method = FARO_EXACT;
        else if (len == 6 && strncmp(m + 1, "greedy", 6) == 0)
            prm.method = FARO_GREEDY;
        else if (len == 7 && strncmp(m + 1, "relaxed", 7) == 0)
            prm.method = FARO_RELAXED;
        else if (len == 4 && strncmp(m + 1, "holt", 4) == 0)
            prm.predictor = AS_PRED_HOLT;
        else if (len == 8 && strncmp(m + 1, "seasonal", 8) == 0)
            prm.predictor = AS_PRED_SEASONAL;
        else
            return NULL;
    }
    as_policy *p = xcalloc(1, sizeof(*p));
    p->k = (kind)k, p->n = njobs, p->oracle = oracle;
    p->jobs = xmalloc(sizeof(as_job) * (size_t)(njobs ? njobs : 1));
    memcpy(p->jobs, jobs, sizeof(as_job) * (size_t)njobs);
    p->st = xcalloc((size_t)(njobs ? njobs : 1), sizeof(job_state));
    p->prm = prm;
    if (p->prm.control_s <= 0) p->prm.control_s = 300;
    if (p->prm.quantile <= 0 || p->prm.quantile >= 1) p->prm.quantile = 0.8;
    if (p->prm.predictor != AS_PRED_HOLT && p->prm.predictor != AS_PRED_SEASONAL) p->prm.predictor = AS_PRED_DEFAULT_IS;
    for (int i = 0; i < njobs; i++) {
        job_state *s = &p->st[i];
        pred_init(&s->pred, p->prm.period_min);
        pq_init(&s->pq, p->prm.period_min);
        s->above_since = s->below_since = s->want_up_since = s->want_down_since = s->hpa_last = -1e9;
        s->above_since = s->below_since = s->want_up_since = s->want_down_since = -1;
        s->target = jobs[i].min;
    }
    return p;
}

void as_policy_free(as_policy *p)
{
    if (!p) return;
    free(p->jobs);
    free(p->st);
    free(p);
}

void as_policy_set_job(as_policy *p, int i, const as_job *job)
{
    if (i >= 0 && i < p->n) p->jobs[i] = *job;
}

double as_policy_last_ms(const as_policy *p)
{
    return p->last_ms;
}

static double avg(const job_state *s, const double *v, int ticks)
{
    int n = s->nsamples < ticks ? s->nsamples : ticks;
    if (n == 0) return 0;
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += v[(s->head - 1 - i + WINDOW) % WINDOW];
    return sum / n;
}

/* how long a condition has held (0 when it just became true, -1 when false) */
static double held(double *since, int cond, double now)
{
    if (!cond) {
        *since = -1;
        return -1;
    }
    if (*since < 0) *since = now;
    return now - *since;
}

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* the targets, within bounds, cut to the capacity: the largest give first */
static void fit(as_policy *p, double capacity, int *t)
{
    double total = 0;
    for (int i = 0; i < p->n; i++) {
        t[i] = clampi(t[i], p->jobs[i].min, p->jobs[i].max);
        total += p->jobs[i].cost * t[i];
    }
    while (total > capacity + 1e-9) {
        int big = -1;
        for (int i = 0; i < p->n; i++)
            if (t[i] > p->jobs[i].min && (big < 0 || t[i] > t[big])) big = i;
        if (big < 0) break;
        t[big]--;
        total -= p->jobs[big].cost;
    }
}

/* the oracle: the true rates of the minute now and the next ones (the last minute known repeats) */
static void oracle_rates(const as_policy *p, int i, double now, double *rate)
{
    int m = (int)floor(now / 60 + 1e-9), last = p->prm.oracle_minutes - 1;
    for (int h = 0; h < FARO_HORIZON; h++) {
        int k = m + h < 0 ? 0 : m + h > last ? last : m + h;
        rate[h] = p->prm.oracle[(size_t)k * p->n + i] / 60.0;
    }
}

static void faro_round(as_policy *p, double now, double capacity, const as_obs *obs, int *t)
{
    faro_job *fj = xcalloc((size_t)p->n, sizeof(faro_job));
    static const faro_objective objs[] = {FARO_FAIRSUM, FARO_SUM, FARO_FAIR};
    for (int i = 0; i < p->n; i++) {
        job_state *s = &p->st[i];
        const as_job *j = &p->jobs[i];
        fj[i] = (faro_job){j->p,
                           j->slo_s,
                           j->slo_q,
                           j->weight,
                           j->cost,
                           j->min,
                           j->max,
                           obs[i].ready + obs[i].starting,
                           FARO_HORIZON,
                           {0},
                           p->prm.drop_penalty > 0 ? p->prm.drop_penalty : 0};
        if (p->oracle) {
            oracle_rates(p, i, now, fj[i].rate);
        } else if (s->pred.n >= 3 && p->prm.predictor == AS_PRED_SEASONAL) {
            pq_forecast(&s->pq, p->prm.quantile, FARO_HORIZON, fj[i].rate);
        } else if (s->pred.n >= 3) {
            pred_forecast(&s->pred, p->prm.quantile, FARO_HORIZON, fj[i].rate);
        } else { /* no history yet: the rate seen now, for the whole horizon */
            for (int h = 0; h < FARO_HORIZON; h++)
                fj[i].rate[h] = s->last_rate;
        }
    }
    faro_solve_grouped(fj, p->n, capacity, objs[p->k], (faro_method)p->prm.method, FARO_GROUP, t);
    free(fj);
}

static int violating(const as_job *j, const as_obs *o)
{
    return o->latency_s > j->slo_s || (o->ready == 0 && o->queued > 0);
}

void as_policy_tick(as_policy *p, double now, double capacity, const as_obs *obs, int *t)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int control = !p->started || now >= p->next_control;
    if (!p->started) p->next_control = now;
    if (control) p->next_control += p->prm.control_s;
    for (int i = 0; i < p->n; i++) { /* bookkeeping every policy shares */
        job_state *s = &p->st[i];
        const as_obs *o = &obs[i];
        if (!p->started) s->minute_start = now, s->target = clampi(o->ready + o->starting, p->jobs[i].min, p->jobs[i].max);
        s->minute_arrivals += o->arrivals;
        s->last_rate = o->arrivals / AS_TICK_S;
        while (now - s->minute_start >= 60) {
            pred_observe(&s->pred, s->minute_arrivals / 60.0);
            pq_observe(&s->pq, s->minute_arrivals / 60.0);
            s->minute_arrivals = 0;
            s->minute_start += 60;
        }
        s->conc[s->head] = o->queued + o->in_service;
        s->busy[s->head] = o->in_service;
        s->head = (s->head + 1) % WINDOW;
        if (s->nsamples < WINDOW) s->nsamples++;
    }
    p->started = 1;
    for (int i = 0; i < p->n; i++) {
        job_state *s = &p->st[i];
        const as_job *j = &p->jobs[i];
        const as_obs *o = &obs[i];
        int cur = o->ready + o->starting, x = s->target;
        int bad = violating(j, o);
        double up = held(&s->above_since, bad, now), down = held(&s->below_since, !bad && o->latency_s > 0, now);
        switch (p->k) {
        case P_FARO_FAIRSUM:
        case P_FARO_SUM:
        case P_FARO_FAIR:
        case P_MARK:
            break; /* below: rounds and the reactive loop */
        case P_FAIRSHARE:
            x = (int)floor(capacity / j->cost / (p->n ? p->n : 1));
            break;
        case P_ONESHOT:
            if ((up >= UP_DELAY_S || down >= DOWN_DELAY_S) && o->latency_s > 0) {
                x = (int)ceil(cur * o->latency_s / j->slo_s);
                s->above_since = s->below_since = -1;
            } else if (up >= UP_DELAY_S) {
                x = cur + 1; /* nothing completed yet: at least one more */
                s->above_since = -1;
            }
            break;
        case P_HPA: { /* every 15 s; scale-down to the largest recommendation of the last 300 s */
            if (now - s->hpa_last < HPA_SYNC_S) break;
            s->hpa_last = now;
            double ratio = o->latency_s > 0 ? o->latency_s / j->slo_s : (bad ? 2.0 : 1.0);
            int want = fabs(ratio - 1) > HPA_TOLERANCE ? (int)ceil(cur * ratio) : cur;
            s->hpa_rec[s->hpa_head] = want, s->hpa_head = (s->hpa_head + 1) % HPA_RECS;
            if (s->hpa_n < HPA_RECS) s->hpa_n++;
            int keep = want;
            for (int k = 0; k < s->hpa_n; k++)
                keep = s->hpa_rec[k] > keep ? s->hpa_rec[k] : keep;
            x = want > cur ? want : keep < cur ? keep : cur;
            break;
        }
        case P_AIAD:
            if (up >= UP_DELAY_S) x = cur + 1, s->above_since = -1;
            if (down >= DOWN_DELAY_S) x = cur - 1, s->below_since = -1;
            break;
        case P_RAY: {
            int want = (int)ceil(avg(s, s->conc, (int)(30 / AS_TICK_S)) / 2.0);
            if (held(&s->want_up_since, want > cur, now) >= UP_DELAY_S) x = want, s->want_up_since = -1;
            if (held(&s->want_down_since, want < cur, now) >= DOWN_DELAY_S) x = want, s->want_down_since = -1;
            break;
        }
        case P_KPA: {
            int stable = (int)ceil(avg(s, s->conc, (int)(60 / AS_TICK_S)) / 0.7);
            int panic = (int)ceil(avg(s, s->conc, (int)(6 / AS_TICK_S)) / 0.7);
            if (panic >= 2 * (o->ready > 0 ? o->ready : 1)) s->panic_until = now + 60;
            x = now < s->panic_until ? (panic > cur ? panic : cur) : stable;
            break;
        }
        }
        s->target = x;
    }
    for (int i = 0; i < p->n; i++)
        t[i] = p->st[i].target;
    if (control && is_faro(p->k)) {
        faro_round(p, now, capacity, obs, t);
    } else if (control && p->k == P_MARK) {
        for (int i = 0; i < p->n; i++) {
            const as_job *j = &p->jobs[i];
            double f[PRED_HORIZON], peak = p->st[i].last_rate;
            if (p->st[i].pred.n >= 3) {
                pred_point(&p->st[i].pred, PRED_HORIZON, f);
                for (int h = 0; h < PRED_HORIZON; h++)
                    peak = fmax(peak, f[h]);
            }
            t[i] = (int)fmax(ceil(peak * j->p / j->slo_s), ceil(peak * j->p / 0.9));
        }
    }
    if (is_faro(p->k) || p->k == P_MARK) {
        /* the reactive loop between rounds: +1 after 30 s above the SLO, from a free slot or,
         * for Faro, from the job that the latency model says can spare one at the rate it
         * sees now (its utility stays 1 with one replica less) */
        double total = 0;
        for (int i = 0; i < p->n; i++)
            total += p->jobs[i].cost * t[i];
        for (int i = 0; i < p->n; i++) {
            job_state *s = &p->st[i];
            if (s->above_since < 0 || now - s->above_since < UP_DELAY_S || t[i] >= p->jobs[i].max) continue;
            int donor = -1;
            if (total + p->jobs[i].cost > capacity + 1e-9 && p->k != P_MARK) {
                double best = -1;
                for (int d = 0; d < p->n; d++) {
                    if (d == i || t[d] <= p->jobs[d].min || p->jobs[d].cost < p->jobs[i].cost || p->st[d].above_since >= 0)
                        continue;
                    double rate = avg(&p->st[d], p->st[d].conc, 1) > 0 ? fmax(p->st[d].last_rate, 0) : p->st[d].last_rate;
                    faro_job fj = {p->jobs[d].p,
                                   p->jobs[d].slo_s,
                                   p->jobs[d].slo_q,
                                   1,
                                   p->jobs[d].cost,
                                   p->jobs[d].min,
                                   p->jobs[d].max,
                                   t[d],
                                   1,
                                   {rate},
                                   0};
                    double spare = t[d] - rate * p->jobs[d].p; /* idle replicas at the current rate */
                    if (faro_utility(&fj, t[d] - 1) >= 1.0 && spare > best) best = spare, donor = d;
                }
                if (donor < 0) continue;
                t[donor]--;
                total -= p->jobs[donor].cost;
            }
            if (total + p->jobs[i].cost > capacity + 1e-9) continue;
            t[i]++;
            total += p->jobs[i].cost;
            s->above_since = -1;
        }
    }
    fit(p, capacity, t);
    for (int i = 0; i < p->n; i++)
        p->st[i].target = t[i];
    clock_gettime(CLOCK_MONOTONIC, &t1);
    p->last_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
}

/* the fewest replicas (within [min, max]) whose latency at rate lambda meets the job's SLO */
static int slo_need(const as_job *j, double lambda)
{
    int lo = j->min > 0 ? j->min : 1;
    for (int c = lo; c < j->max; c++)
        if (as_latency(lambda, j->p, c, j->slo_q) <= j->slo_s) return c;
    return j->max > lo ? j->max : lo;
}

int as_yield(const as_job *jobs, const as_obs *obs, const int *prio, int n, int claim_priority, int give, int *target)
{
    if (claim_priority < 0) return 0;
    int *floor_ = xmalloc(sizeof(int) * ((size_t)n + 1));
    for (int i = 0; i < n; i++) {
        int live = obs[i].ready + obs[i].starting;
        floor_[i] = target[i];
        if (prio[i] > claim_priority) continue;                                    /* a higher priority: its own business */
        if (target[i] > live) target[i] = live > jobs[i].min ? live : jobs[i].min; /* no growth into claimed workers */
        int over = jobs[i].slo_s > 0 && obs[i].latency_s > jobs[i].slo_s;
        int need = slo_need(&jobs[i], obs[i].arrivals / AS_TICK_S);
        floor_[i] = over ? target[i] : need > jobs[i].min ? need : jobs[i].min;
    }
    int given = 0;
    while (given < give) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (prio[i] <= claim_priority && target[i] > floor_[i] &&
                (best < 0 || target[i] - floor_[i] > target[best] - floor_[best]))
                best = i;
        if (best < 0) break;
        target[best]--;
        given++;
    }
    free(floor_);
    return given;
}
