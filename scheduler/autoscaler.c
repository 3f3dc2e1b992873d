/* autoscaler.c - the leader's live loop for inference replicas: rates in, Faro's allocation out (autoscaler.h). */
#include "scheduler/autoscaler.h"
#include "scheduler/autoscale/admit.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "wire/keys.h"
#include "common/log.h"
#include "wire/msg.h"
#include "spec/serve_spec.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JOBS 256
#define DEFAULT_SERVICE_S 0.01 /* until a replica has measured it */
#define STALE_MS 10000         /* a server's latency window older than this is ignored */
#define DRAIN_GRACE_S 5.0      /* a replica told to drain no longer counts, for this long */
#define MAX_DRAINING 16

typedef struct {
    char id[48];
    char *raw; /* the task */
    as_job spec;
    int priority;    /* the job's class: it gives way to waiting jobs of this priority or higher */
    double arrivals; /* the servers' counter at the last tick */
    int have_counter;
    int last_live, last_target;
    char draining[MAX_DRAINING][64];
    double drained_at[MAX_DRAINING];
    int idle_s;                    /* replicas.min 0: scaled to zero after this long without a request; else 0 */
    double last_active;            /* when it last had an arrival or a waiting request (idle_s jobs) */
    bool asleep;                   /* scaled to zero, not woken since */
    bool shedding;                 /* overloaded: the gateways admit only what the replicas serve within the SLO */
    double admit_scale;            /* the model's servable rate times this: lowered while the admitted still miss the SLO */
    int last_queued;               /* the requests waiting at the last tick */
    double busy, served, p_recent; /* the replicas' totals at the last tick; the time per request since */
    long long cold_starts;
} job;

struct autoscaler {
    char policy[32];
    as_params prm;
    as_policy *pol;
    job jobs[MAX_JOBS];
    int n;
    double last_tick;
};

autoscaler *autoscaler_create(const char *policy, const as_params *params)
{
    as_job probe = {0.01, 1, 0.99, 1, 1, 1, 1};
    as_policy *p = as_policy_create(policy, 1, &probe, params);
    if (!p) return NULL;
    as_policy_free(p);
    autoscaler *a = xcalloc(1, sizeof(*a));
    snprintf(a->policy, sizeof(a->policy), "%s", policy);
    a->prm = *params;
    a->last_tick = -1e9;
    return a;
}

void autoscaler_free(autoscaler *a)
{
    if (!a) return;
    for (int i = 0; i < a->n; i++)
        free(a->jobs[i].raw);
    as_policy_free(a->pol);
    free(a);
}

static int cmp_id(const void *x, const void *y)
{
    return strcmp(((const job *)x)->id, ((const job *)y)->id);
}

static bool exists(rs_conn *r, const char *fmt, const char *a, int b)
{
    redisReply *rep = b >= 0 ? rs_command(r, fmt, a, b) : rs_command(r, fmt, a);
    bool yes = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
    freeReplyObject(rep);
    return yes;
}

/* re-reads the registered jobs; recreates the policy when the set changed (its state is per job) */
static int load_jobs(autoscaler *a, rs_conn *r)
{
    redisReply *rep = rs_command(r, "HGETALL %s", K_INFER_JOBS);
    if (!rep || rep->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        return -1;
    }
    job fresh[MAX_JOBS];
    int n = 0;
    for (size_t i = 0; i + 1 < rep->elements && n < MAX_JOBS; i += 2) {
        const char *id = rep->element[i]->str, *raw = rep->element[i + 1]->str;
        task_msg t;
        if (msg_task_decode(raw, &t) != 0) continue;
        if (exists(r, "EXISTS " K_CANCEL_PREFIX "%s", id, -1)) { /* cancelled: out of the loop, its queue emptied */
            /* the queue first: a failure leaves the job registered, and the next tick tries again */
            if (rs_do(r, "DEL %s%s", K_INFER_QUEUE_PREFIX, id) && rs_do(r, "HDEL %s %s", K_INFER_JOBS, id))
                log_info("autoscaler: job %s cancelled; no longer scaled", id);
        } else if (!exists(r, "EXISTS " K_RETRY_PREFIX "%s:%d", id, t.attempt)) { /* not a generation being replaced */
            job *j = &fresh[n++];
            memset(j, 0, sizeof(*j));
            snprintf(j->id, sizeof(j->id), "%s", id);
            j->raw = xstrdup(raw);
            j->priority = t.priority;
            serve_settings s;
            serve_settings_get(t.spec, &s);
            /* a job that scales to zero is at least 1 to the policy while it has traffic; the idle rule
             * (scale_to_zero) takes it to 0 */
            j->spec = (as_job){s.service_ms > 0 ? s.service_ms / 1000 : DEFAULT_SERVICE_S,
                               s.slo_ms / 1000,
                               s.slo_q,
                               s.weight,
                               1,
                               s.min_replicas > 0 ? s.min_replicas : 1,
                               s.max_replicas};
            j->idle_s = s.min_replicas == 0 ? s.idle_s : 0;
            j->last_active = -1;
        }
        msg_task_clear(&t);
    }
    freeReplyObject(rep);
    qsort(fresh, (size_t)n, sizeof(job), cmp_id);
    int same = n == a->n && a->pol;
    for (int i = 0; same && i < n; i++)
        same = strcmp(fresh[i].id, a->jobs[i].id) == 0;
    for (int i = 0; i < n; i++) { /* keep what we knew about the jobs that stay */
        for (int k = 0; k < a->n; k++)
            if (strcmp(a->jobs[k].id, fresh[i].id) == 0) {
                fresh[i].arrivals = a->jobs[k].arrivals, fresh[i].have_counter = a->jobs[k].have_counter;
                fresh[i].last_live = a->jobs[k].last_live, fresh[i].last_target = a->jobs[k].last_target;
                memcpy(fresh[i].draining, a->jobs[k].draining, sizeof(fresh[i].draining));
                memcpy(fresh[i].drained_at, a->jobs[k].drained_at, sizeof(fresh[i].drained_at));
                if (a->jobs[k].spec.p != DEFAULT_SERVICE_S) fresh[i].spec.p = a->jobs[k].spec.p;
                fresh[i].last_active = a->jobs[k].last_active, fresh[i].cold_starts = a->jobs[k].cold_starts;
                fresh[i].asleep = a->jobs[k].asleep, fresh[i].shedding = a->jobs[k].shedding;
                fresh[i].admit_scale = a->jobs[k].admit_scale, fresh[i].last_queued = a->jobs[k].last_queued;
                fresh[i].busy = a->jobs[k].busy, fresh[i].served = a->jobs[k].served, fresh[i].p_recent = a->jobs[k].p_recent;
            }
    }
    for (int i = 0; i < a->n; i++)
        free(a->jobs[i].raw);
    memcpy(a->jobs, fresh, sizeof(job) * (size_t)n);
    a->n = n;
    if (!same) {
        as_policy_free(a->pol);
        as_job specs[MAX_JOBS];
        for (int i = 0; i < n; i++)
            specs[i] = a->jobs[i].spec;
        a->pol = as_policy_create(a->policy, n, specs, &a->prm);
    }
    return 0;
}

/* arrivals, queue (the Redis queue and what the servers hold on the direct path), latency window and measured
 * service time of one job; how many servers reported it lately */
static int observe(autoscaler *a, rs_conn *r, job *j, int idx, as_obs *o)
{
    int servers = 0;
    redisReply *q = rs_command(r, "LLEN %s%s", K_INFER_QUEUE_PREFIX, j->id);
    o->queued = q && q->type == REDIS_REPLY_INTEGER ? (int)q->integer : 0;
    freeReplyObject(q);
    redisReply *h = rs_command(r, "HGETALL %s%s", K_INFER_STATS_PREFIX, j->id);
    double busy = 0, served = 0, lat = 0;
    int64_t now = clock_now_ms();
    for (size_t i = 0; h && h->type == REDIS_REPLY_ARRAY && i + 1 < h->elements; i += 2) {
        const char *f = h->element[i]->str, *v = h->element[i + 1]->str;
        if (strcmp(f, "arrivals") == 0) {
            double c = atof(v);
            o->arrivals = j->have_counter && c >= j->arrivals ? c - j->arrivals : 0;
            j->arrivals = c, j->have_counter = 1;
            continue;
        }
        json_t *s = json_loads(v, 0, NULL);
        if (strncmp(f, "server:", 7) == 0) {
            json_t *ts = json_object_get(s, "ts");
            if (json_is_integer(ts) && now - json_integer_value(ts) < STALE_MS) {
                lat = fmax(lat, json_number_value(json_object_get(s, "p99_ms")) / 1000);
                o->queued += (int)json_integer_value(json_object_get(s, "queued")); /* the direct path's waiting requests */
                servers++;
            }
        } else if (strcmp(f, "drops") != 0 && strcmp(f, "cold_starts") != 0) { /* a replica: w_<id> -> {served, busy_s} */
            served += json_number_value(json_object_get(s, "served"));
            busy += json_number_value(json_object_get(s, "busy_s"));
        }
        json_decref(s);
    }
    freeReplyObject(h);
    o->latency_s = lat;
    if (served >= 20) { /* the replicas' measured time per request (a batch shares its time) */
        j->spec.p = busy / served;
        as_policy_set_job(a->pol, idx, &j->spec);
    }
    /* since the last tick (admission's: the time per request under the load now, not the job's whole life) */
    j->p_recent = served - j->served >= 5 && busy >= j->busy ? (busy - j->busy) / (served - j->served) : j->spec.p;
    j->busy = busy, j->served = served;
    return servers;
}

/* Admission (admit.h): once the job's replicas are what the autoscaler wants (none starting) and requests
 * still arrive faster than they serve within the SLO, each server's gateway admits its share of the servable
 * rate and answers the rest 429 at once; the key is set again every tick while it lasts and expires after
 * K_INFER_ADMIT_TTL_S (a scheduler that stops leaves no job shedding).  *why gets a note when it starts or
 * ends. */
static void admission(rs_conn *r, job *j, const as_obs *o, int want, int servers, char *why, size_t wl)
{
    why[0] = '\0';
    if (!(j->admit_scale > 0)) j->admit_scale = 1;
    double model = as_admit_max_rate(j->p_recent > 0 ? j->p_recent : j->spec.p, o->ready, j->spec.slo_q, j->spec.slo_s);
    double rate = o->arrivals / AS_TICK_S;
    bool settled = o->ready > 0 && o->starting == 0 && o->ready >= want;
    bool shed = settled && as_admit_shed(rate, model, j->shedding);
    /* the model is M/M/c and its p an average: while the requests waiting now would take more than half the
     * SLO to drain and their number still grows, admit a fifth less each tick; a fifth more a tick while they
     * take less than a fifth of it and do not grow (the queue is what the next requests wait behind, unlike a
     * latency window; a backlog from before the shedding that shrinks is left to drain) */
    double drain_s = o->queued / fmax(model * j->admit_scale, 1e-9);
    if (shed && j->shedding && drain_s > 0.5 * j->spec.slo_s && o->queued > j->last_queued)
        j->admit_scale = fmax(0.2, j->admit_scale * 0.8);
    else if (shed && drain_s < 0.2 * j->spec.slo_s && o->queued <= j->last_queued)
        j->admit_scale = fmin(1, j->admit_scale * 1.2);
    else if (!shed)
        j->admit_scale = 1;
    j->last_queued = o->queued;
    double servable = model * j->admit_scale;
    if (shed) {
        char v[32];
        snprintf(v, sizeof(v), "%.3f", servable / (servers > 0 ? servers : 1));
        /* a lost SET leaves the gateways admitting everything for a tick: rs_do logged it */
        rs_do(r, "SET %s%s %s EX %d", K_INFER_ADMIT_PREFIX, j->id, v, K_INFER_ADMIT_TTL_S);
        if (!j->shedding)
            snprintf(why, wl,
                     "admission: %d replica%s serve at most %.1f req/s within the SLO (p%g <= %.0f ms); %.1f req/s arrive: the "
                     "gateway answers the rest 429 at once",
                     o->ready, o->ready == 1 ? "" : "s", servable, j->spec.slo_q * 100, j->spec.slo_s * 1000, rate);
    } else if (j->shedding) {
        rs_do(r, "DEL %s%s", K_INFER_ADMIT_PREFIX, j->id);
        snprintf(why, wl, "admission: off (%.1f req/s arrive, %.1f servable within the SLO on %d replica%s)", rate, servable,
                 o->ready, o->ready == 1 ? "" : "s");
    }
    j->shedding = shed;
}

static bool is_draining(job *j, const char *worker, double now)
{
    for (int k = 0; k < MAX_DRAINING; k++)
        if (j->draining[k][0] && strcmp(j->draining[k], worker) == 0 && now - j->drained_at[k] < DRAIN_GRACE_S) return true;
    return false;
}

static void note(rs_conn *r, const job *j, const char *reason, int live, int target)
{
    event_msg e;
    msg_event_init(&e, j->id, "scheduler");
    snprintf(e.reason, sizeof(e.reason), "%s", reason);
    e.metrics = json_pack("{s:i, s:i}", "replicas", live, "target", target);
    if (j->idle_s) json_object_set_new(e.metrics, "cold_starts", json_integer(j->cold_starts)); /* scales to zero */
    char *s = msg_event_encode(&e);
    /* a lost event is a line less in the job's history, not a failure: rs_do logged it */
    if (s) rs_do(r, "XADD %s MAXLEN ~ %d * %s %s", K_EVENTS_STREAM, K_STREAM_MAXLEN, F_EVENT, s);
    free(s);
    msg_event_clear(&e);
}

/* Scale to zero (replicas.min 0): after idle_s without an arrival or a waiting request the target is 0
 * (the replicas drain); a request that comes while there is none waits in the job's queue, which counts
 * as activity, so the policy's target (at least 1) applies again: a cold start, counted in the job's
 * statistics (cold_starts) and noted.  A job first seen counts as active then (the scheduler started its
 * first replica).  *why gets a note for the event when the job went to zero or woke up. */
static int scale_to_zero(rs_conn *r, job *j, const as_obs *o, int target, double now, char *why, size_t wl)
{
    why[0] = '\0';
    if (!j->idle_s) return target;
    if (j->last_active < 0 || o->arrivals > 0 || o->queued > 0) j->last_active = now;
    if (now - j->last_active >= j->idle_s) {
        if (!j->asleep) snprintf(why, wl, "; no request for %d s: scaled to zero (replicas.min 0)", j->idle_s);
        j->asleep = true;
        return 0;
    }
    if (j->asleep && target > 0) {
        j->asleep = false;
        j->cold_starts++;
        /* a lost count is a figure less on the dashboard: rs_do logged it */
        rs_do(r, "HINCRBY %s%s cold_starts 1", K_INFER_STATS_PREFIX, j->id);
        snprintf(why, wl, "; cold start %lld: a request waits with no replica", j->cold_starts);
    }
    return target;
}

void autoscaler_tick(autoscaler *a, rs_conn *r, registry *reg, double now)
{
    if (now - a->last_tick < AS_TICK_S) return;
    a->last_tick = now;
    if (load_jobs(a, r) != 0 || a->n == 0 || !a->pol) return;
    as_obs obs[MAX_JOBS];
    int target[MAX_JOBS], servers[MAX_JOBS] = {0};
    double capacity = 0;
    for (int w = 0; w < reg->n; w++) { /* the inference tier: every worker not running other work */
        bool ours = reg->w[w].free;
        for (int i = 0; !ours && i < a->n; i++)
            ours = strcmp(reg->w[w].job_id, a->jobs[i].id) == 0;
        capacity += ours;
    }
    for (int i = 0; i < a->n; i++) {
        memset(&obs[i], 0, sizeof(obs[i]));
        for (int w = 0; w < reg->n; w++)
            if (strcmp(reg->w[w].job_id, a->jobs[i].id) == 0 && !is_draining(&a->jobs[i], reg->w[w].id, now)) {
                if (reg->w[w].started)
                    obs[i].ready++;
                else
                    obs[i].starting++;
            }
        servers[i] = observe(a, r, &a->jobs[i], i, &obs[i]);
    }
    as_policy_tick(a->pol, now, capacity, obs, target);
    /* a job waiting for workers (policy.h, rule 6): jobs of its priority or lower stop growing and give
     * back what their SLO allows, less the replicas already draining for it */
    int before[MAX_JOBS];
    memcpy(before, target, sizeof(int) * (size_t)a->n);
    if (reg->claim.priority >= 0) {
        as_job specs[MAX_JOBS];
        int prio[MAX_JOBS], draining = 0;
        for (int i = 0; i < a->n; i++) {
            specs[i] = a->jobs[i].spec, prio[i] = a->jobs[i].priority;
            for (int w = 0; w < reg->n && prio[i] <= reg->claim.priority; w++)
                draining += strcmp(reg->w[w].job_id, a->jobs[i].id) == 0 && is_draining(&a->jobs[i], reg->w[w].id, now);
        }
        int give = reg->claim.workers - draining;
        as_yield(specs, obs, prio, a->n, reg->claim.priority, give > 0 ? give : 0, target);
    }
    for (int i = 0; i < a->n; i++) {
        job *j = &a->jobs[i];
        int live = obs[i].ready + obs[i].starting;
        char why[300], zero[120];
        int want = scale_to_zero(r, j, &obs[i], target[i], now, zero, sizeof(zero));
        int added = 0, removed = 0;
        task_msg t;
        bool have_task = msg_task_decode(j->raw, &t) == 0;
        for (int w = 0; have_task && w < reg->n && live + added < want; w++) {
            if (!reg->w[w].free) continue;
            redisReply *rep = rs_command(r, "LPUSH %s%s %s", K_TASKS_PREFIX, reg->w[w].id, j->raw);
            if (rep && rep->type == REDIS_REPLY_INTEGER) registry_assign(reg, w, &t), added++;
            freeReplyObject(rep);
        }
        if (have_task) msg_task_clear(&t);
        for (int w = reg->n - 1; w >= 0 && live - removed > want; w--) {
            const reg_worker *rw = &reg->w[w];
            if (strcmp(rw->job_id, j->id) != 0 || !rw->started || is_draining(j, rw->id, now)) continue;
            /* not asked to drain: the replica keeps serving, and the next tick asks again */
            if (!rs_do(r, "SET %s%s:%s 1 EX 600", K_INFER_DRAIN_PREFIX, j->id, rw->id)) break;
            int slot = 0;
            for (int k = 1; k < MAX_DRAINING; k++)
                if (j->drained_at[k] < j->drained_at[slot]) slot = k;
            snprintf(j->draining[slot], sizeof(j->draining[slot]), "%s", rw->id);
            j->drained_at[slot] = now;
            removed++;
        }
        char shed[300];
        admission(r, j, &obs[i], want, servers[i], shed, sizeof(shed));
        if (shed[0]) {
            note(r, j, shed, live + added - removed, want);
            log_info("job %s: %s", j->id, shed);
        }
        if (added || removed || want != j->last_target) {
            snprintf(
                why, sizeof(why), "autoscaler (%s): replicas %d -> %d (target %d; %.1f req/s, queue %d, p99 %.0f ms)%s%s",
                a->policy, live, live + added - removed, want, obs[i].arrivals / AS_TICK_S, obs[i].queued, obs[i].latency_s * 1000,
                removed && want < before[i] && want < live ? "; given back to a job of equal or higher priority waiting for workers"
                                                           : "",
                zero);
            note(r, j, why, live + added - removed, want);
            log_info("job %s: %s", j->id, why);
        }
        j->last_live = live + added - removed, j->last_target = want;
    }
}
