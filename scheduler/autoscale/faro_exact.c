/* faro_exact.c - the exact optimum of Faro's objectives over integer replica counts, pure (faro_exact.h). */
#include "scheduler/autoscale/faro_exact.h"
#include "common/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TOL 1e-12

typedef struct {
    const faro_job *jobs;
    int n, budget;
    faro_objective obj;
    int *cost, *k; /* per job: integral slots per replica, options (min .. min + k - 1 replicas) */
    double **u;    /* u[i][t]: utility with min + t replicas */
    double *dp, *next;
    int *choice; /* choice[i * (budget + 1) + b]: job i's option in the best use of b slots */
    long work, max_work;
} ex;

/* the largest Σ U (Σ w U for Sum) with every job's utility within [lo, hi] and at most the budget,
 * the fewest slots among ties; 0 and the counts in x, -1 when none, -2 over max_work */
static int program(ex *e, double lo, double hi, int *x)
{
    int B = e->budget;
    for (int b = 0; b <= B; b++)
        e->dp[b] = -INFINITY;
    e->dp[0] = 0;
    for (int i = 0; i < e->n; i++) {
        int *ch = &e->choice[(size_t)i * (B + 1)];
        for (int b = 0; b <= B; b++)
            e->next[b] = -INFINITY;
        for (int t = 0; t < e->k[i]; t++) {
            double v = e->u[i][t];
            if (v < lo - TOL || v > hi + TOL) continue;
            if (e->obj == FARO_SUM) v *= e->jobs[i].weight;
            int w = e->cost[i] * (e->jobs[i].min + t);
            for (int b = w; b <= B; b++)
                if (e->dp[b - w] + v > e->next[b] + TOL) e->next[b] = e->dp[b - w] + v, ch[b] = t;
            e->work += B - w + 1;
        }
        double *tmp = e->dp;
        e->dp = e->next, e->next = tmp;
        if (e->max_work > 0 && e->work > e->max_work) return -2;
    }
    int best = -1;
    for (int b = 0; b <= B; b++)
        if (e->dp[b] > -INFINITY && (best < 0 || e->dp[b] > e->dp[best] + TOL)) best = b;
    if (best < 0) return -1;
    for (int i = e->n - 1; i >= 0; i--) {
        int t = e->choice[(size_t)i * (B + 1) + best];
        x[i] = e->jobs[i].min + t;
        best -= e->cost[i] * x[i];
    }
    return 0;
}

/* the objective of counts x */
static double value(const ex *e, const int *x)
{
    double su = 0, swu = 0, mn = INFINITY, mx = -INFINITY;
    for (int i = 0; i < e->n; i++) {
        double v = e->u[i][x[i] - e->jobs[i].min];
        su += v, swu += e->jobs[i].weight * v, mn = fmin(mn, v), mx = fmax(mx, v);
    }
    return faro_objective_of(e->obj, e->n, su, swu, mn, mx);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Fair and FairSum: the best programme over the pairs of levels (lo, hi), with the bounds of the header */
static int search(ex *e, int *x)
{
    int n = e->n, nl = 0;
    for (int i = 0; i < n; i++)
        nl += e->k[i];
    double *lev = xmalloc(sizeof(double) * (size_t)nl), *umax = xmalloc(sizeof(double) * (size_t)n);
    int *cand = xmalloc(sizeof(int) * (size_t)n);
    nl = 0;
    for (int i = 0; i < n; i++) {
        umax[i] = -INFINITY;
        for (int t = 0; t < e->k[i]; t++)
            lev[nl++] = e->u[i][t], umax[i] = fmax(umax[i], e->u[i][t]);
    }
    qsort(lev, (size_t)nl, sizeof(double), cmpd);
    int m = 0;
    for (int i = 0; i < nl; i++)
        if (m == 0 || lev[i] > lev[m - 1] + TOL) lev[m++] = lev[i];
    double best = -INFINITY;
    int rc = -1, valid = 1; /* x on entry: the solution to beat, when it is one */
    for (int i = 0; i < n && valid; i++)
        valid = x[i] >= e->jobs[i].min && x[i] - e->jobs[i].min < e->k[i];
    if (valid) {
        long slots = 0;
        for (int i = 0; i < n; i++)
            slots += (long)e->cost[i] * x[i];
        if (slots <= e->budget) best = value(e, x), rc = 0;
    }
    for (int li = m - 1; li >= 0 && rc != -2; li--) {
        double lo = lev[li], floor_hi = -INFINITY; /* every job's smallest utility >= lo: the largest of these */
        int ok = 1;
        for (int i = 0; i < n && ok; i++) {
            double least = INFINITY;
            for (int t = 0; t < e->k[i]; t++)
                if (e->u[i][t] >= lo - TOL) least = fmin(least, e->u[i][t]);
            ok = least < INFINITY, floor_hi = fmax(floor_hi, least);
        }
        if (!ok) continue;
        if (e->obj == FARO_FAIRSUM && n * lo <= best + TOL) break; /* Σ U <= N hi: FairSum <= N lo, and lo only falls */
        for (int hi_i = 0; hi_i < m; hi_i++) {
            double hi = lev[hi_i];
            if (hi < floor_hi - TOL) continue;
            double su = 0;
            for (int i = 0; i < n; i++)
                su += fmin(hi, umax[i]);
            if (faro_objective_of(e->obj, n, su, su, lo, hi) <= best + TOL) break; /* falls with hi */
            int r = program(e, lo, hi, cand);
            if (r == -2) {
                rc = -2;
                break;
            }
            if (r < 0) continue;
            double v = value(e, cand);
            if (v > best + TOL) {
                best = v, rc = 0;
                memcpy(x, cand, sizeof(int) * (size_t)n);
            }
        }
    }
    free(lev), free(umax), free(cand);
    return rc;
}

int faro_exact(const faro_job *jobs, int n, double budget, faro_objective obj, long max_work, int *x)
{
    if (n <= 0 || budget < 0) return -1;
    ex e = {jobs, n, (int)floor(budget + 1e-9), obj, NULL, NULL, NULL, NULL, NULL, NULL, 0, max_work};
    e.cost = xmalloc(sizeof(int) * (size_t)n), e.k = xmalloc(sizeof(int) * (size_t)n);
    int need = 0, rc = -1;
    for (int i = 0; i < n; i++) {
        e.cost[i] = (int)lround(jobs[i].cost);
        if (e.cost[i] < 1 || fabs(jobs[i].cost - e.cost[i]) > 1e-9 || jobs[i].min < 0) goto out;
        need += e.cost[i] * jobs[i].min;
    }
    if (need > e.budget) goto out;
    long least = 0; /* the cell updates of one programme: over the bound, give up before any utility is computed */
    for (int i = 0; i < n; i++) {
        int extra = (e.budget - need) / e.cost[i], top = jobs[i].max < jobs[i].min + extra ? jobs[i].max : jobs[i].min + extra;
        e.k[i] = top - jobs[i].min + 1;
        least += (long)e.k[i] * (e.budget + 1);
    }
    if (max_work > 0 && least > max_work) goto out;
    e.u = xcalloc((size_t)n, sizeof(double *));
    for (int i = 0; i < n; i++) {
        e.u[i] = xmalloc(sizeof(double) * (size_t)e.k[i]);
        for (int t = 0; t < e.k[i]; t++)
            e.u[i][t] = faro_utility(&jobs[i], jobs[i].min + t);
    }
    e.dp = xmalloc(sizeof(double) * (size_t)(e.budget + 1)), e.next = xmalloc(sizeof(double) * (size_t)(e.budget + 1));
    e.choice = xmalloc(sizeof(int) * (size_t)n * (size_t)(e.budget + 1));
    int *cand = xmalloc(sizeof(int) * (size_t)n);
    memcpy(cand, x, sizeof(int) * (size_t)n);
    rc = obj == FARO_SUM ? program(&e, -INFINITY, INFINITY, cand) : search(&e, cand);
    if (rc == 0) memcpy(x, cand, sizeof(int) * (size_t)n);
    rc = rc == 0 ? 0 : -1;
    free(cand), free(e.dp), free(e.next), free(e.choice);
    for (int i = 0; i < n; i++)
        free(e.u[i]);
    free(e.u);
out:
    free(e.cost), free(e.k);
    return rc;
}
