#include "scheduler/policy.h"

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

static int count_free(const pol_worker *w, int n)
{
    int f = 0;
    for (int i = 0; i < n; i++)
        f += w[i].free;
    return f;
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

int policy_decide(const pol_job *jobs, int njobs, pol_worker *workers, int nworkers, const pol_tenant *tenants, int ntenants,
                  pol_decision *out, pol_preemption *pre, int *npre)
{
    *npre = 0;
    if (njobs == 0) return 0;
    tstate *ts = calloc((size_t)njobs + (size_t)nworkers + 1, sizeof(*ts));
    int *order = malloc(sizeof(int) * (size_t)njobs);
    bool *doomed = calloc((size_t)nworkers + 1, sizeof(bool));
    int nts = 0, placed = 0;

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
            t->jobs = malloc(sizeof(int) * (size_t)njobs);
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
        if (j->nsites > 0) { /* pinned slots: each site's own worker, or wait (no reservation, no preemption) */
            int pick[POL_MAX_GANG], k = 0;
            for (; k < j->nsites && k < POL_MAX_GANG; k++) {
                pick[k] = -1;
                for (int i = 0; i < nworkers && pick[k] < 0; i++) {
                    bool taken = false;
                    for (int q = 0; q < k; q++)
                        taken |= pick[q] == i;
                    if (workers[i].free && !taken && workers[i].site && strcmp(workers[i].site, j->sites[k]) == 0) pick[k] = i;
                }
                if (pick[k] < 0) break;
            }
            if (k < j->nsites) {
                wait(d, "site %s: no free worker labelled site=%s", j->sites[k], j->sites[k]);
                continue;
            }
            d->action = POL_PLACE;
            d->nworkers = j->nsites;
            for (k = 0; k < j->nsites; k++)
                d->workers[k] = pick[k], workers[pick[k]].free = false;
            t->used += j->nsites;
            placed++;
            continue;
        }
        int free = count_free(workers, nworkers);
        if (reserved) {
            if (free == 0)
                wait(d, "no capacity: all %d workers are busy", nworkers);
            else if (strcmp(reserved->tenant, j->tenant) == 0)
                wait(d, "held for job %s (needs %d slots at once; %d free)", reserved->job_id, reserved->slots, free);
            else /* another tenant's job id is not this tenant's to see */
                wait(d, "held for another tenant's job (needs %d slots at once; %d free)", reserved->slots, free);
            continue;
        }
        if (free >= slots) {
            d->action = POL_PLACE;
            d->nworkers = 0;
            for (int i = 0; i < nworkers && d->nworkers < slots; i++) {
                if (!workers[i].free) continue;
                workers[i].free = false;
                d->workers[d->nworkers++] = i;
            }
            t->used += slots;
            placed++;
            continue;
        }
        int victims[POL_MAX_GANG];
        int found = choose_victims(workers, nworkers, doomed, j->priority, slots - free, victims);
        if (found == slots - free) {
            for (int v = 0; v < found; v++)
                pre[(*npre)++] = (pol_preemption){victims[v], ji};
            wait(d, "preempting %d lower-priority job%s to free %d slot%s", found, found == 1 ? "" : "s", slots,
                 slots == 1 ? "" : "s");
        } else if (slots > 1) {
            wait(d, "gang incomplete: %d of %d slots free; holding them", free, slots);
        } else {
            wait(d, "no capacity: all %d workers are busy", nworkers);
        }
        reserved = j;
    }

    /* elastic gangs take the workers nobody waits for, in priority order, within their quota */
    for (int k = 0; k < njobs && !reserved; k++) {
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
    return placed;
}
