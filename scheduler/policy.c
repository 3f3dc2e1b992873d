/* policy.c - who runs next: the pure decision function over jobs, workers and tenants (policy.h). */
#include "scheduler/policy.h"
#include "common/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const pol_tenant *t; /* NULL: unknown tenant (weight 1, no quota) */
    const char *id;
    int used;
    int *jobs; /* indices, in (priority desc, seq asc) order */
    int njobs, next;
} tstate;

static const pol_job *sort_jobs; /* qsort has no context argument; policy_decide is not reentrant */

static int by_priority_then_seq(const void *a, const void *b)
{
    const pol_job *x = &sort_jobs[*(const int *)a], *y = &sort_jobs[*(const int *)b];
    if (x->priority != y->priority) return y->priority - x->priority;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static tstate *find_tenant(tstate *ts, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (strcmp(ts[i].id, id) == 0) return &ts[i];
    return NULL;
}

static double share(const tstate *t)
{
    double w = t->t && t->t->weight > 0 ? t->t->weight : 1.0;
    return t->used / w;
}

/* the tenant whose next job goes first; NULL when every queue is drained */
static tstate *pick(tstate *ts, int n, const pol_job *jobs)
{
    tstate *best = NULL;
    for (int i = 0; i < n; i++) {
        tstate *t = &ts[i];
        if (t->next >= t->njobs) continue;
        if (!best) {
            best = t;
            continue;
        }
        const pol_job *a = &jobs[t->jobs[t->next]], *b = &jobs[best->jobs[best->next]];
        if (a->priority != b->priority) {
            if (a->priority > b->priority) best = t;
        } else if (share(t) != share(best)) {
            if (share(t) < share(best)) best = t;
        } else if (a->seq < b->seq) {
            best = t;
        }
    }
    return best;
}

/* chooses up to `need` victims for a job of priority prio; returns how many were found */
static int choose_victims(pol_worker *w, int n, bool *doomed, int prio, int need, int *victims)
{
    int found = 0;
    while (found < need) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (w[i].free || doomed[i] || !w[i].preemptible || w[i].priority >= prio) continue;
            if (best < 0 || w[i].priority < w[best].priority || (w[i].priority == w[best].priority && w[i].seq > w[best].seq))
                best = i;
        }
        if (best < 0) break;
        victims[found++] = best;
        doomed[best] = true;
    }
    if (found < need)
        for (int i = 0; i < found; i++)
            doomed[victims[i]] = false; /* not enough: preempt nobody */
    return found;
}

static void wait(pol_decision *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wait(pol_decision *d, const char *fmt, ...)
{
    d->action = POL_WAIT;
    d->nworkers = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
    va_end(ap);
}

/* What frees workers for a job of one priority that waits for capacity (rule 4), from the busy
 * workers: those running jobs that end by themselves, and the replicas inference jobs of its
 * priority or lower may give back (above their minimum).  The rest are held by inference jobs it
 * cannot wait for: `stuck` is the first of them. */
typedef struct {
    unsigned version; /* of the workers it was computed on (+1) */
    int ending;       /* busy workers whose jobs end by themselves */
    int spare;        /* replicas above their job's minimum, of inference jobs of priority <= the job's */
    int spare_w;      /* a worker of the job with the most to spare, -1 */
    int stuck_w;      /* a worker of an inference job that gives nothing back (at its minimum, or of a higher priority), -1 */
    bool stuck_higher;
} outlook;

typedef struct {
    pol_worker *w;
    int n;
    const bool *doomed;
    int *replicas; /* per worker: how many replicas its inference job has (on its first worker only; 0 elsewhere) */
    unsigned version;
    outlook cache[3]; /* per priority (low, normal, high) */
} cluster;

static const pol_worker *sort_workers; /* as sort_jobs */

static int by_job_id(const void *a, const void *b)
{
    return strcmp(sort_workers[*(const int *)a].job_id, sort_workers[*(const int *)b].job_id);
}

/* counts each inference job's replicas once (on its first worker in index order) */
static void count_replicas(cluster *c)
{
    int *idx = xmalloc(sizeof(int) * ((size_t)c->n + 1)), m = 0;
    for (int i = 0; i < c->n; i++) {
        c->replicas[i] = 0;
        if (!c->w[i].free && c->w[i].serving && c->w[i].job_id) idx[m++] = i;
    }
    sort_workers = c->w;
    qsort(idx, (size_t)m, sizeof(int), by_job_id);
    for (int a = 0, b; a < m; a = b) {
        int first = idx[a];
        for (b = a; b < m && strcmp(c->w[idx[b]].job_id, c->w[idx[a]].job_id) == 0; b++)
            first = idx[b] < first ? idx[b] : first;
        c->replicas[first] = b - a;
    }
    free(idx);
}

static const outlook *look(cluster *c, int prio)
{
    outlook *o = &c->cache[prio < 0 ? 0 : prio > 2 ? 2 : prio];
    if (o->version == c->version + 1) return o;
    *o = (outlook){c->version + 1, 0, 0, -1, -1, false};
    int best = 0;
    for (int i = 0; i < c->n; i++) {
        const pol_worker *w = &c->w[i];
        if (w->free || c->doomed[i]) continue;
        if (!w->serving) {
            o->ending++;
            continue;
        }
        if (!c->replicas[i]) continue; /* counted on its job's first worker */
        int spare = w->priority <= prio ? c->replicas[i] - (w->serving_min > 0 ? w->serving_min : 1) : 0;
        if (spare > 0) {
            o->spare += spare;
            if (spare > best) best = spare, o->spare_w = i;
        }
        if (spare < c->replicas[i] && o->stuck_w < 0) o->stuck_w = i, o->stuck_higher = w->priority > prio;
    }
    return o;
}

static void taken(cluster *c, int i)
{
    c->w[i].free = false;
    c->version++;
}

/* an inference job as the waiting job's tenant may see it: by id when it is the same tenant's */
static const char *job_name(const pol_worker *w, const pol_job *j, char *buf, size_t len)
{
    if (w->tenant && strcmp(w->tenant, j->tenant) == 0)
        snprintf(buf, len, "inference job %s", w->job_id);
    else
        snprintf(buf, len, "another tenant's inference job");
    return buf;
}

/* slot k's pinned identity key (its site's public_key), or NULL */
static const char *slot_key(const pol_job *j, int k)
{
    return j->site_keys && k < j->nsites ? j->site_keys[k] : NULL;
}

/* Chooses the workers of job j among the free ones (not `kept` for a reservation): its labelled or
 * pinned sites on workers with that label and key, its other slots on any, unlabelled ones first.
 * Returns the number of slots it could fill (pick[] has them in slot order, -1 for an unfilled one);
 * *site_short gets the first labelled or pinned slot without a worker (-1: none). */
static int choose(const pol_job *j, int slots, const cluster *c, const bool *kept, int *pick, int *site_short)
{
    int filled = 0;
    *site_short = -1;
    for (int k = 0; k < slots; k++)
        pick[k] = -1;
    for (int pass = 0; pass < 3; pass++) /* labelled sites; then other slots on unlabelled workers; then on any */
        for (int k = 0; k < slots; k++) {
            const char *label = k < j->nsites ? j->sites[k] : NULL, *key = slot_key(j, k);
            if (pick[k] >= 0 || (pass == 0) != (label != NULL || key != NULL)) continue;
            for (int i = 0; i < c->n && pick[k] < 0; i++) {
                if (!c->w[i].free || kept[i]) continue;
                if (pass == 0 && label && (!c->w[i].site || strcmp(c->w[i].site, label) != 0)) continue;
                if (pass == 0 && key && (!c->w[i].site_key || strcmp(c->w[i].site_key, key) != 0)) continue;
                if (pass == 1 && c->w[i].site) continue;
                bool dup = false;
                for (int q = 0; q < slots && !dup; q++)
                    dup = pick[q] == i;
                if (!dup) pick[k] = i, filled++;
            }
            if (pass == 0 && pick[k] < 0 && *site_short < 0) *site_short = k;
        }
    return filled;
}

/* why job j's slot k, a labelled or pinned site, waits: no worker has its label (and key), or they are all busy */
static void site_wait(pol_decision *d, const cluster *c, const pol_job *j, int k)
{
    const char *label = k < j->nsites ? j->sites[k] : NULL, *key = slot_key(j, k);
    bool labelled = false, both = false;
    for (int i = 0; i < c->n; i++) {
        bool l = !label || (c->w[i].site && strcmp(c->w[i].site, label) == 0);
        labelled |= l && label;
        both |= l && (!key || (c->w[i].site_key && strcmp(c->w[i].site_key, key) == 0));
    }
    if (label && !labelled)
        wait(d, "no worker labelled site=%s: start one with --labels site=%s, or drop the site's label to run it on any worker",
             label, label);
    else if (!both) /* the key in short: the reason has room for the field */
        wait(d, "no worker%s%s holds the key spec.sites[%d].public_key (%.20s...): start it with its --site-key",
             label ? " labelled site=" : "", label ? label : "", k, key);
    else if (label)
        wait(d, "site=%s: every worker labelled site=%s is busy", label, label);
    else
        wait(d, "spec.sites[%d]: the worker holding its public_key is busy", k);
}

/* Why job j (slots workers, `free` of them free now) waits for capacity, given what may free workers
 * for it (o); true when it may hold a reservation (what it lacks will come without anyone acting). */
static bool explain(pol_decision *d, const pol_job *j, int slots, int free, int nworkers, const outlook *o, const cluster *c)
{
    char who[64];
    int lack = slots - free;
    bool blocked = o->ending + o->spare < lack;
    const char *head = slots > 1 ? "gang incomplete" : "no capacity";
    char have[48];
    if (slots > 1)
        snprintf(have, sizeof(have), "%d of %d workers free", free, slots);
    else
        snprintf(have, sizeof(have), "all %d workers are busy", nworkers);
    if (blocked && o->stuck_w >= 0) {
        const pol_worker *s = &c->w[o->stuck_w];
        bool own = s->tenant && strcmp(s->tenant, j->tenant) == 0;
        const char *rest = slots > 1 ? "the rest" : "them", *why = o->stuck_higher ? "(higher priority)" : "at its minimum";
        if (own)
            wait(d, "%s: %s; inference job %s holds %s %s: cancel %s or add a worker", head, have, s->job_id, rest, why, s->job_id);
        else
            wait(d, "%s: %s; another tenant's inference job holds %s %s: add a worker or ask an admin", head, have, rest, why);
        return false;
    }
    if (o->spare > 0 && o->spare_w >= 0) {
        wait(d, "%s: %s; waiting for %s to give back a replica%s", head, have, job_name(&c->w[o->spare_w], j, who, sizeof(who)),
             o->spare >= lack ? "" : " and for running jobs to finish");
        return true;
    }
    if (slots > 1)
        wait(d, "%s: %s; holding them until %d running job%s finish%s (short jobs may use them meanwhile)", head, have, lack,
             lack == 1 ? "" : "s", lack == 1 ? "es" : "");
    else
        wait(d, "%s: %s", head, have);
    return true;
}

int policy_decide(const pol_job *jobs, int njobs, pol_worker *workers, int nworkers, const pol_tenant *tenants, int ntenants,
                  pol_decision *out, pol_preemption *pre, int *npre)
{
    return policy_decide_claim(jobs, njobs, workers, nworkers, tenants, ntenants, out, pre, npre, NULL);
}

int policy_decide_claim(const pol_job *jobs, int njobs, pol_worker *workers, int nworkers, const pol_tenant *tenants, int ntenants,
                        pol_decision *out, pol_preemption *pre, int *npre, pol_claim *claim)
{
    *npre = 0;
    pol_claim cl = {-1, 0, NULL};
    if (claim) *claim = cl;
    if (njobs == 0) return 0;
    tstate *ts = xcalloc((size_t)njobs + (size_t)nworkers + 1, sizeof(*ts));
    int *order = xmalloc(sizeof(int) * (size_t)njobs);
    bool *doomed = xcalloc((size_t)nworkers + 1, sizeof(bool));
    bool *kept = xcalloc((size_t)nworkers + 1, sizeof(bool)); /* a reservation's labelled workers: no backfill there */
    int nts = 0, placed = 0, nfree = 0;
    cluster c = {workers, nworkers, doomed, xcalloc((size_t)nworkers + 1, sizeof(int)), 0, {{0}}};
    count_replicas(&c);
    for (int i = 0; i < nworkers; i++)
        nfree += workers[i].free;

    /* tenants that have queued jobs, with their slots in use */
    for (int i = 0; i < njobs; i++)
        order[i] = i;
    sort_jobs = jobs;
    qsort(order, (size_t)njobs, sizeof(int), by_priority_then_seq);
    for (int k = 0; k < njobs; k++) {
        const pol_job *j = &jobs[order[k]];
        tstate *t = find_tenant(ts, nts, j->tenant);
        if (!t) {
            t = &ts[nts++];
            t->id = j->tenant;
            t->jobs = xmalloc(sizeof(int) * (size_t)njobs);
            for (int i = 0; i < ntenants; i++)
                if (strcmp(tenants[i].id, j->tenant) == 0) t->t = &tenants[i];
        }
        t->jobs[t->njobs++] = order[k];
    }
    for (int i = 0; i < nworkers; i++) {
        tstate *t = workers[i].free || !workers[i].tenant ? NULL : find_tenant(ts, nts, workers[i].tenant);
        if (t) t->used++;
    }

    const pol_job *reserved = NULL;
    bool waiting = false; /* a job waits for capacity: no leftovers for elastic gangs */
    tstate *t;
    while ((t = pick(ts, nts, jobs))) {
        int ji = t->jobs[t->next++];
        const pol_job *j = &jobs[ji];
        pol_decision *d = &out[ji];
        int slots = j->slots < 1 ? 1 : j->slots > POL_MAX_GANG ? POL_MAX_GANG : j->slots;
        int quota = t->t ? t->t->max_slots : -1;
        if (j->hold) {
            wait(d, "resizing: waiting a moment for the workers of its previous generation to finish");
            continue;
        }
        if (quota >= 0 && t->used + slots > quota) {
            wait(d, "quota: tenant uses %d of its %d slots; this job needs %d", t->used, quota, slots);
            continue;
        }
        if (reserved && !j->brief) { /* only short jobs may use what a reservation holds (backfill) */
            if (nfree == 0)
                wait(d, "no capacity: all %d workers are busy", nworkers);
            else if (strcmp(reserved->tenant, j->tenant) == 0)
                wait(d, "held for job %s (needs %d workers at once; %d free)", reserved->job_id, reserved->slots, nfree);
            else /* another tenant's job id is not this tenant's to see */
                wait(d, "held for another tenant's job (needs %d workers at once; %d free)", reserved->slots, nfree);
            continue;
        }
        int pickw[POL_MAX_GANG], site_short;
        int filled = choose(j, slots, &c, kept, pickw, &site_short);
        if (filled == slots) {
            d->action = POL_PLACE;
            d->nworkers = slots;
            for (int k = 0; k < slots; k++)
                d->workers[k] = pickw[k], taken(&c, pickw[k]);
            nfree -= slots;
            t->used += slots;
            placed++;
            continue;
        }
        if (site_short >= 0) { /* a labelled site without a free worker: wait, naming it; hold nothing back */
            site_wait(d, &c, j, site_short);
            continue;
        }
        if (reserved) { /* a short job that does not fit what is free */
            wait(d, "no capacity: %d of %d workers free, this job needs %d", nfree, nworkers, slots);
            continue;
        }
        if (slots > nworkers) { /* can never fit: say so, hold nothing back */
            if (nworkers == 0)
                wait(d, "no capacity: no worker is registered");
            else
                wait(d, "needs %d workers at once; the cluster has %d: add %d worker%s or cancel it", slots, nworkers,
                     slots - nworkers, slots - nworkers == 1 ? "" : "s");
            continue;
        }
        waiting = true;
        int victims[POL_MAX_GANG];
        int found = choose_victims(workers, nworkers, doomed, j->priority, slots - filled, victims);
        if (found == slots - filled) {
            for (int v = 0; v < found; v++)
                pre[(*npre)++] = (pol_preemption){victims[v], ji};
            c.version++;
            wait(d, "preempting %d lower-priority job%s to free %d slot%s", found, found == 1 ? "" : "s", slots,
                 slots == 1 ? "" : "s");
            if (cl.priority < 0) cl = (pol_claim){j->priority, 0, j->job_id};
            reserved = j;
            continue;
        }
        const outlook *o = look(&c, j->priority);
        bool hold = explain(d, j, slots, filled, nworkers, o, &c);
        if (cl.priority < 0) cl = (pol_claim){j->priority, slots - filled, j->job_id};
        if (!hold) continue; /* blocked: holding workers for it would only idle them */
        reserved = j;
        for (int k = 0; k < slots; k++)
            if (pickw[k] >= 0 && k < j->nsites && (j->sites[k] || slot_key(j, k))) kept[pickw[k]] = true;
    }
    if (claim) *claim = cl;

    /* elastic gangs take the workers nobody waits for, in priority order, within their quota */
    for (int k = 0; k < njobs && !reserved && !waiting; k++) {
        const pol_job *j = &jobs[order[k]];
        pol_decision *d = &out[order[k]];
        if (d->action != POL_PLACE || j->max_slots <= d->nworkers) continue;
        tstate *jt = find_tenant(ts, nts, j->tenant);
        int quota = jt && jt->t ? jt->t->max_slots : -1, cap = j->max_slots > POL_MAX_GANG ? POL_MAX_GANG : j->max_slots;
        for (int i = 0; i < nworkers && d->nworkers < cap && (quota < 0 || jt->used < quota); i++) {
            if (!workers[i].free) continue;
            workers[i].free = false;
            d->workers[d->nworkers++] = i;
            if (jt) jt->used++;
        }
    }

    for (int i = 0; i < nts; i++)
        free(ts[i].jobs);
    free(ts);
    free(order);
    free(doomed);
    free(kept);
    free(c.replicas);
    return placed;
}
