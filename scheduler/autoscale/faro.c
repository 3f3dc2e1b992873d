/* faro.c - Faro's cluster-wide replica allocation, pure (faro.h). */
#include "scheduler/autoscale/faro.h"
#include "common/alloc.h"
#include "scheduler/autoscale/faro_exact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EPS 1e-9
#define SHRINK_LOSS 1e-4
#define LATTICE 8                /* steps per replica of the relaxed solve */
#define AUTO_EXACT_JOBS 12       /* FARO_AUTO: the exact solve for at most this many jobs (the paper's 10), */
#define AUTO_EXACT_WORK 1000000L /* when it takes at most this many cell updates (a few ms) */

/* The search state.  Counts are in steps of 1/g replica (g = 1: integer counts; g > 1: the relaxed problem on a
 * lattice of real counts). */
typedef struct {
    const faro_job *jobs;
    int n, g;
    faro_objective obj;
    double **memo; /* memo[i][x]: utility, NAN when not computed */
    int *cap;      /* the largest x memoised per job */
    int *x;
    double *u;
    double sum_u, sum_wu;
    int lo[3], hi[3]; /* indices of the 3 smallest and 3 largest utilities */
} state;

static double util(state *s, int i, int x)
{
    if (x < 0) return 0;
    if (x > s->cap[i]) x = s->cap[i];
    double *m = &s->memo[i][x];
    if (isnan(*m)) *m = faro_utility_at(&s->jobs[i], (double)x / s->g);
    return *m;
}

static void rank_extremes(state *s)
{
    for (int k = 0; k < 3; k++)
        s->lo[k] = s->hi[k] = -1;
    for (int i = 0; i < s->n; i++) {
        double v = s->u[i];
        for (int k = 0; k < 3; k++)
            if (s->lo[k] < 0 || v < s->u[s->lo[k]]) {
                memmove(&s->lo[k + 1], &s->lo[k], sizeof(int) * (size_t)(2 - k));
                s->lo[k] = i;
                break;
            }
        for (int k = 0; k < 3; k++)
            if (s->hi[k] < 0 || v > s->u[s->hi[k]]) {
                memmove(&s->hi[k + 1], &s->hi[k], sizeof(int) * (size_t)(2 - k));
                s->hi[k] = i;
                break;
            }
    }
}

static void refresh(state *s)
{
    s->sum_u = s->sum_wu = 0;
    for (int i = 0; i < s->n; i++) {
        s->u[i] = util(s, i, s->x[i]);
        s->sum_u += s->u[i];
        s->sum_wu += s->jobs[i].weight * s->u[i];
    }
    rank_extremes(s);
}

/* the objective if job a had utility ua and job b had ub (b may be -1) */
static double score(const state *s, int a, double ua, int b, double ub)
{
    double su = s->sum_u - s->u[a] + ua, swu = s->sum_wu - s->jobs[a].weight * (s->u[a] - ua);
    if (b >= 0) su += ub - s->u[b], swu -= s->jobs[b].weight * (s->u[b] - ub);
    if (s->obj == FARO_SUM) return swu;
    double mn = ua, mx = ua;
    if (b >= 0) mn = fmin(mn, ub), mx = fmax(mx, ub);
    for (int k = 0; k < 3; k++) /* the smallest / largest among the unchanged jobs */
        if (s->lo[k] >= 0 && s->lo[k] != a && s->lo[k] != b) {
            mn = fmin(mn, s->u[s->lo[k]]);
            break;
        }
    for (int k = 0; k < 3; k++)
        if (s->hi[k] >= 0 && s->hi[k] != a && s->hi[k] != b) {
            mx = fmax(mx, s->u[s->hi[k]]);
            break;
        }
    return faro_objective_of(s->obj, s->n, su, swu, mn, mx);
}

static double current_score(const state *s)
{
    return score(s, 0, s->u[0], -1, 0);
}

static double used(const state *s)
{
    double t = 0;
    for (int i = 0; i < s->n; i++)
        t += s->jobs[i].cost * s->x[i];
    return t / s->g;
}

/* a job's cost of d steps */
static double cost_of(const state *s, int i, int d)
{
    return s->jobs[i].cost * d / s->g;
}

static int lowest(const state *s, int i)
{
    return s->jobs[i].min * s->g;
}

static double load_of(const faro_job *j)
{
    double peak = 0;
    for (int h = 0; h < (j->nh < 1 ? 1 : j->nh); h++)
        peak = fmax(peak, j->rate[h]);
    return peak * j->p;
}

/* over budget (capacity shrank, or counts rounded up): remove the d steps that hurt least, while over */
static void trim(state *s, double budget, int d)
{
    while (used(s) > budget + EPS) {
        int best = -1;
        double bv = -INFINITY;
        for (int i = 0; i < s->n; i++)
            if (s->x[i] - d >= lowest(s, i)) {
                double v = score(s, i, util(s, i, s->x[i] - d), -1, 0);
                if (v > bv) bv = v, best = i;
            }
        if (best < 0) return; /* the minimums alone exceed the budget */
        s->x[best] -= d;
        refresh(s);
    }
}

/* add the d steps that help the objective most while the budget lasts and they help */
static void add(state *s, double budget, int d)
{
    for (;;) {
        double free_slots = budget - used(s), bv = current_score(s) + EPS;
        int best = -1;
        for (int i = 0; i < s->n; i++)
            if (s->x[i] + d <= s->cap[i] && cost_of(s, i, d) <= free_slots + EPS) {
                double v = score(s, i, util(s, i, s->x[i] + d), -1, 0);
                if (v > bv) bv = v, best = i;
            }
        if (best < 0) return;
        s->x[best] += d;
        refresh(s);
    }
}

/* move d steps from one job to another while that helps (the best move each time) */
static void move(state *s, double budget, int d)
{
    int n = s->n, *x = s->x;
    for (int iter = 0; iter < 4 * n + 64; iter++) {
        double free_slots = budget - used(s), bv = current_score(s) + EPS;
        int bi = -1, bj = -1;
        for (int j = 0; j < n; j++) {
            if (x[j] - d < lowest(s, j)) continue;
            double uj = util(s, j, x[j] - d);
            for (int i = 0; i < n; i++) {
                if (i == j || x[i] + d > s->cap[i] || cost_of(s, i, d) > free_slots + cost_of(s, j, d) + EPS) continue;
                double v = score(s, i, util(s, i, x[i] + d), j, uj);
                if (v > bv) bv = v, bi = i, bj = j;
            }
        }
        if (bi < 0) return;
        x[bi] += d, x[bj] -= d;
        refresh(s);
    }
}

/* the paper's last steps, after any optimisation: shrink, then hand out the leftovers */
static double shrink_and_hand_out(state *s, double budget)
{
    const faro_job *jobs = s->jobs;
    int n = s->n, *x = s->x;
    /* 4. shrink: drop replicas that buy (almost) nothing */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < n; i++)
            if (x[i] > jobs[i].min && current_score(s) - score(s, i, util(s, i, x[i] - 1), -1, 0) <= SHRINK_LOSS) {
                x[i]--;
                refresh(s);
                changed = 1;
            }
    }
    /* 5. leftovers: one at a time to the job with the most load per replica (headroom against
     *    prediction errors, whatever the objective says: the value returned is the one before) */
    double reached = current_score(s);
    for (;;) {
        double free_slots = budget - used(s), worst = -1;
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (x[i] >= s->cap[i] || jobs[i].cost > free_slots + EPS) continue;
            double load = load_of(&jobs[i]) / (x[i] > 0 ? x[i] : 0.5);
            if (load > worst) worst = load, best = i;
        }
        if (best < 0 || worst <= 0) break;
        x[best]++;
        refresh(s);
    }
    return reached;
}

static void state_init(state *s, const faro_job *jobs, int n, double budget, faro_objective obj, int g, int *x)
{
    *s = (state){jobs,
                 n,
                 g,
                 obj,
                 xcalloc((size_t)n, sizeof(double *)),
                 xcalloc((size_t)n, sizeof(int)),
                 x,
                 xcalloc((size_t)n, sizeof(double)),
                 0,
                 0,
                 {0},
                 {0}};
    for (int i = 0; i < n; i++) {
        int hi = jobs[i].max;
        double fit = jobs[i].cost > 0 ? floor(budget / jobs[i].cost + EPS) : hi;
        if (fit < hi) hi = (int)fit;
        if (hi < jobs[i].min) hi = jobs[i].min;
        s->cap[i] = hi * g;
        s->memo[i] = xmalloc(sizeof(double) * (size_t)(hi * g + 1));
        for (int k = 0; k <= hi * g; k++)
            s->memo[i][k] = NAN;
        int c = jobs[i].current;
        x[i] = (c < jobs[i].min ? jobs[i].min : c > hi ? hi : c) * g;
    }
    refresh(s);
}

static void state_free(state *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->memo[i]);
    free(s->memo), free(s->cap), free(s->u);
}

/* FARO_GREEDY's optimisation on integer counts */
static void greedy(state *s, double budget)
{
    trim(s, budget, 1);
    add(s, budget, 1);
    move(s, budget, 1);
}

/* FARO_RELAXED: the paper's solve.  The relaxed problem on real counts by a compass search (derivative-free) on
 * a lattice of 1/LATTICE replica, from the current counts, the step halving from 4 replicas to one lattice step;
 * then every count rounded up and, while over the budget, the replica that hurts least removed. */
static void relaxed(state *s, double budget)
{
    state r;
    int *xr = xmalloc(sizeof(int) * (size_t)s->n);
    state_init(&r, s->jobs, s->n, budget, s->obj, LATTICE, xr);
    trim(&r, budget, LATTICE / 4);
    for (int d = 2 * LATTICE; d >= 1; d /= 2) {
        add(&r, budget, d);
        move(&r, budget, d);
    }
    for (int i = 0; i < s->n; i++) {
        int up = (xr[i] + LATTICE - 1) / LATTICE;
        s->x[i] = up > s->cap[i] ? s->cap[i] : up;
    }
    state_free(&r);
    free(xr);
    refresh(s);
    trim(s, budget, 1);
    add(s, budget, 1); /* then the integer moves of the greedy step from there */
    move(s, budget, 1);
}

/* FARO_AUTO when the exact programme is too big: the better of the relaxed and the greedy solve */
static void relaxed_or_greedy(state *s, double budget)
{
    int n = s->n, *start = xmalloc(sizeof(int) * (size_t)n), *mine = xmalloc(sizeof(int) * (size_t)n);
    memcpy(start, s->x, sizeof(int) * (size_t)n);
    relaxed(s, budget);
    double v = current_score(s);
    memcpy(mine, s->x, sizeof(int) * (size_t)n);
    memcpy(s->x, start, sizeof(int) * (size_t)n);
    refresh(s);
    greedy(s, budget);
    if (v > current_score(s) + EPS) {
        memcpy(s->x, mine, sizeof(int) * (size_t)n);
        refresh(s);
    }
    free(start), free(mine);
}

double faro_solve_by(const faro_job *jobs, int n, double budget, faro_objective obj, faro_method method, int *x)
{
    if (n <= 0) return 0;
    state s;
    state_init(&s, jobs, n, budget, obj, 1, x);
    if (method == FARO_GREEDY)
        greedy(&s, budget);
    else if (method == FARO_RELAXED)
        relaxed(&s, budget);
    else if (method == FARO_EXACT && faro_exact(jobs, n, budget, obj, FARO_EXACT_UNBOUNDED, x) != 0)
        greedy(&s, budget);
    else if (method == FARO_AUTO && n <= AUTO_EXACT_JOBS) {
        greedy(&s, budget); /* the solution for the exact search to beat, and the answer if it gives up */
        faro_exact(jobs, n, budget, obj, AUTO_EXACT_WORK, x);
    } else if (method == FARO_AUTO)
        relaxed_or_greedy(&s, budget);
    refresh(&s);
    double v = shrink_and_hand_out(&s, budget);
    state_free(&s);
    return v;
}

double faro_solve(const faro_job *jobs, int n, double budget, faro_objective obj, int *x)
{
    return faro_solve_by(jobs, n, budget, obj, FARO_AUTO, x);
}

static int by_load(const void *a, const void *b, void *arg)
{
    const faro_job *jobs = arg;
    double x = load_of(&jobs[*(const int *)a]), y = load_of(&jobs[*(const int *)b]);
    return x < y ? 1 : x > y ? -1 : 0;
}

void faro_solve_grouped(const faro_job *jobs, int n, double budget, faro_objective obj, faro_method method, int group_size, int *x)
{
    if (group_size < 2 || n <= group_size) {
        faro_solve_by(jobs, n, budget, obj, method, x);
        return;
    }
    int *order = xmalloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        order[i] = i;
    qsort_r(order, (size_t)n, sizeof(int), by_load, (void *)jobs);
    int groups = (n + group_size - 1) / group_size;
    /* deal the jobs round-robin by load, so every group holds a mix of heavy and light jobs */
    faro_job *g = xmalloc(sizeof(faro_job) * (size_t)group_size);
    int *gx = xmalloc(sizeof(int) * (size_t)group_size), *member = xmalloc(sizeof(int) * (size_t)group_size);
    double total_load = 0, mins = 0;
    for (int i = 0; i < n; i++)
        total_load += load_of(&jobs[i]), mins += jobs[i].cost * jobs[i].min;
    double spare = budget - mins, left = budget;
    for (int k = 0; k < groups; k++) {
        int m = 0;
        double gl = 0, gm = 0;
        for (int r = k; r < n; r += groups) {
            member[m] = order[r], g[m] = jobs[order[r]];
            gl += load_of(&g[m]), gm += g[m].cost * g[m].min;
            m++;
        }
        double share = gm + (spare > 0 ? spare * (total_load > 0 ? gl / total_load : 1.0 / groups) : 0);
        if (k == groups - 1 || share > left) share = left; /* the last group takes what the others left */
        faro_solve_by(g, m, share, obj, method, gx);
        for (int i = 0; i < m; i++) {
            x[member[i]] = gx[i];
            left -= g[i].cost * gx[i];
        }
    }
    free(order), free(g), free(gx), free(member);
}
