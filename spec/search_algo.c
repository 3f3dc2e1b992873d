/* search_algo.c - the search's algorithms (search_algo.h): the draws of random search and asha, the
 * grid's enumeration, asha's rungs and its rule at a rung.  Pure: no I/O. */
#include "spec/search_algo.h"

#include "common/alloc.h"
#include "common/rng.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DRAW_STREAM 0x5eac4ULL /* the stream's second key: trial draws, nothing else */

/* u in [0, 1), 53 bits */
static double uniform01(rng_state *r)
{
    return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* x to 6 significant digits, kept within [lo, hi]: readable in the trial's environment, the same
 * number in its JSON */
static double tidy(double x, double lo, double hi)
{
    if (x == 0 || !isfinite(x)) return x;
    double mag = pow(10, 5 - floor(log10(fabs(x))));
    double y = round(x * mag) / mag;
    return y < lo ? lo : y > hi ? hi : y;
}

static json_t *draw(const search_param *p, rng_state *r)
{
    double u = uniform01(r);
    switch (p->kind) {
    case PARAM_LOGUNIFORM:
        return json_real(tidy(exp(log(p->lo) + u * (log(p->hi) - log(p->lo))), p->lo, p->hi));
    case PARAM_UNIFORM:
        return json_real(tidy(p->lo + u * (p->hi - p->lo), p->lo, p->hi));
    case PARAM_INT:
        return json_integer((json_int_t)p->lo + (json_int_t)(u * (p->hi - p->lo + 1)));
    case PARAM_CHOICE:
    default:
        return json_incref(json_array_get(p->choices, (size_t)(u * (double)json_array_size(p->choices))));
    }
}

/* a grid parameter's number of points */
static double points(const search_param *p)
{
    return p->kind == PARAM_CHOICE ? (double)json_array_size(p->choices) : p->hi - p->lo + 1;
}

json_t *search_trial_params(const search_settings *s, int index)
{
    json_t *out = json_object();
    if (s->algorithm == SEARCH_GRID) {
        double rest = index; /* mixed radix: the last parameter fastest */
        for (int i = s->nparams - 1; i >= 0; i--) {
            const search_param *p = &s->params[i];
            double n = points(p), d = fmod(rest, n);
            rest = floor(rest / n);
            json_object_set_new(out, p->name,
                                p->kind == PARAM_CHOICE ? json_incref(json_array_get(p->choices, (size_t)d))
                                                        : json_integer((json_int_t)(p->lo + d)));
        }
        return out;
    }
    rng_state r;
    rng_seed(&r, rng_mix(s->seed, (uint64_t)index, DRAW_STREAM));
    for (int i = 0; i < s->nparams; i++)
        json_object_set_new(out, s->params[i].name, draw(&s->params[i], &r));
    return out;
}

int search_rungs(const search_settings *s, double *rungs, int max)
{
    int n = 0;
    if (s->algorithm != SEARCH_ASHA || !s->has_budget) return 0;
    for (double r = s->min_r; r < s->max_r * (1 - 1e-12) && n < max; r *= s->reduction)
        rungs[n++] = r;
    return n;
}

bool search_better(double a, double b, bool maximize)
{
    return maximize ? a > b : a < b;
}

static int ascending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

asha_verdict search_asha_rule(const double *recorded, int nrecorded, double value, bool maximize, int reduction)
{
    asha_verdict v = {.n = nrecorded + 1};
    v.keep = (v.n + reduction - 1) / reduction;
    double *all = xmalloc(sizeof(double) * (size_t)v.n);
    for (int i = 0; i < nrecorded; i++)
        all[i] = recorded[i];
    all[nrecorded] = value;
    qsort(all, (size_t)v.n, sizeof(double), ascending);
    v.cut = all[maximize ? v.n - v.keep : v.keep - 1]; /* the keep-th best: a tie with it continues */
    v.stop = search_better(v.cut, value, maximize);
    free(all);
    return v;
}

/* whether x ranks before y at a rung: better, or as good with the lower trial number */
static bool ranks_before(const asha_record *x, const asha_record *y, bool maximize)
{
    return search_better(x->value, y->value, maximize) || (x->value == y->value && x->trial < y->trial);
}

int search_asha_promotable(const asha_record *recs, int n, bool maximize, int reduction)
{
    int top = n / reduction, found = -1, found_rank = top;
    for (int i = 0; i < n; i++) { /* O(n^2): a rung holds at most max_trials (1,000) records */
        if (recs[i].promoted) continue;
        int rank = 0; /* how many rank before it */
        for (int j = 0; j < n && rank < found_rank; j++)
            rank += j != i && ranks_before(&recs[j], &recs[i], maximize);
        if (rank < found_rank) found = i, found_rank = rank;
    }
    return found;
}

int search_to_start(const search_settings *s, int started, int live)
{
    int room = s->parallel - live, left = s->max_trials - started;
    int n = room < left ? room : left;
    return n > 0 ? n : 0;
}
