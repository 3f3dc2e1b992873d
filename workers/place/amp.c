/* amp.c - the strategy search: cost model, stage cuts, ranking.
 *
 * Layout.  GPU rank r = node * gpus_per_node + local.  Pipeline stage s
 * holds ranks [s * mp * dp, (s + 1) * mp * dp); inside it data-parallel
 * replica k holds the mp consecutive ranks from s * mp * dp + k * mp.  As
 * mp divides gpus_per_node, a tensor-parallel group never leaves a node.
 * A stage runs at the speed of its slowest GPU (its replicas and shards
 * wait for each other).
 *
 * Cost of (mp, dp, pp, mbs), with B = global_batch / (dp * mbs)
 * micro-batches (times in ms, bandwidths in bytes/ms):
 *   t_fwd(l, s) = forward_ms(l) / (mp * speed(s))
 *                 + [mp > 1] 2 * 2 (mp - 1) / mp * activation_bytes(l) / intra
 *                 (two ring all-reduces of the layer's activation per
 *                 forward pass, as Megatron's tensor parallelism does)
 *   e(l, s)     = 3 * mbs * t_fwd(l, s)              (backward ~ 2x forward)
 *   S(s)        = sum of e(l, s) over the stage's layers
 *   c(s)        = 2 * mbs * activation_bytes(last layer of s) / link(s, s+1)
 *                 (activation forward, its gradient back; the link is
 *                 intra-node when both stages sit in one node)
 *   pipeline    = (B - 1) * max_s S(s) + sum_s S(s) + sum_s c(s)
 *   all-reduce  = max over stages of 2 (dp - 1) / dp * params(s) *
 *                 bytes_per_param / mp / link(dp group of s)
 *                 (stages reduce in parallel; METHODS' formula with the
 *                 stage's own parameters)
 *   iteration   = pipeline + all-reduce.
 *
 * Stage cuts.  The objective (B - 1) * max + sum does not split over
 * stages, so: (1) a min-max DP gives the smallest bottleneck L*; (2) a DP
 * minimising sum + cut communication under a bottleneck cap L gives g(L),
 * non-increasing in L; g(inf) = g_min.  The optimum's bottleneck is one of
 * the stage times S(i..j, s), so trying those values from L* upwards and
 * stopping once (B - 1) * L + g_min cannot beat the best found is exact;
 * at most AMP_MAX_TRIES values are tried per strategy (else it is marked
 * inexact; with B = 1 no value needs trying).  Each DP is O(pp * L^2). */
#include "workers/place/amp.h"

#include "common/alloc.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

#define AMP_MAX_TRIES 256
#define GBPS_TO_BYTES_PER_MS 125000.0

typedef struct config {
    const amp_problem *p;
    int mp, dp, pp, mbs, B;
    double *speed;   /* per stage */
    double *fw, *tp; /* prefix sums over layers: forward ms, tensor-parallel ms */
    double *cut;     /* per (stage s, layer i): communication of a cut after layer i - 1 leaving stage s */
    double *dp_link; /* per stage: bandwidth of its data-parallel group */
    /* DP tables, (pp) x (L + 1) */
    double *val;
    int *arg;
} config;

/* ---- the cost model ---- */

static double stage_time(const config *c, int i, int j, int s)
{
    double fwd = (c->fw[j] - c->fw[i]) / (c->mp * c->speed[s]) + (c->tp[j] - c->tp[i]);
    return 3.0 * c->mbs * fwd;
}

static int node_of(const amp_problem *p, int rank)
{
    return rank / p->gpus_per_node;
}

static double link_between(const amp_problem *p, int first_rank, int last_rank)
{
    return node_of(p, first_rank) == node_of(p, last_rank) ? p->intra_gbps * GBPS_TO_BYTES_PER_MS
                                                           : p->inter_gbps * GBPS_TO_BYTES_PER_MS;
}

static void layout(config *c)
{
    const amp_problem *p = c->p;
    int width = c->mp * c->dp;
    for (int s = 0; s < c->pp; s++) {
        double v = DBL_MAX;
        for (int r = s * width; r < (s + 1) * width; r++)
            if (p->gpu_speed[r] < v) v = p->gpu_speed[r];
        c->speed[s] = v;
        c->dp_link[s] = link_between(p, s * width, (s + 1) * width - 1);
    }
}

static void prefix_sums(config *c)
{
    const amp_problem *p = c->p;
    double intra = p->intra_gbps * GBPS_TO_BYTES_PER_MS;
    c->fw[0] = c->tp[0] = 0;
    for (int l = 0; l < p->n_layers; l++) {
        double tp = c->mp > 1 ? 2.0 * 2.0 * (c->mp - 1) / c->mp * p->layers[l].activation_bytes / intra : 0;
        c->fw[l + 1] = c->fw[l] + p->layers[l].forward_ms;
        c->tp[l + 1] = c->tp[l] + tp;
    }
    int L = p->n_layers, width = c->mp * c->dp;
    for (int s = 0; s + 1 < c->pp; s++) {
        double link = link_between(p, s * width, (s + 2) * width - 1);
        for (int i = 1; i <= L; i++)
            c->cut[s * (L + 1) + i] = 2.0 * c->mbs * p->layers[i - 1].activation_bytes / link;
    }
}

/* ---- stage cuts ---- */

/* Smallest possible bottleneck stage time. */
static double min_bottleneck(config *c)
{
    int L = c->p->n_layers, pp = c->pp;
    double *v = c->val;
    for (int j = 1; j <= L; j++)
        v[j] = stage_time(c, 0, j, 0);
    for (int s = 1; s < pp; s++)
        for (int j = s + 1; j <= L - (pp - 1 - s); j++) {
            double best = DBL_MAX;
            for (int i = s; i < j; i++) {
                double m = v[(s - 1) * (L + 1) + i], t = stage_time(c, i, j, s);
                if (t > m) m = t;
                if (m < best) best = m;
            }
            v[s * (L + 1) + j] = best;
        }
    return v[(pp - 1) * (L + 1) + L];
}

/* Minimum of sum of stage times + cut communication with every stage at
 * most `cap`; DBL_MAX when impossible.  c->arg holds the cuts. */
static double min_sum(config *c, double cap)
{
    int L = c->p->n_layers, pp = c->pp;
    double *v = c->val;
    for (int j = 1; j <= L; j++) {
        double t = stage_time(c, 0, j, 0);
        v[j] = t <= cap ? t : DBL_MAX;
    }
    for (int s = 1; s < pp; s++)
        for (int j = s + 1; j <= L - (pp - 1 - s); j++) {
            double best = DBL_MAX;
            int at = -1;
            for (int i = s; i < j; i++) {
                double prev = v[(s - 1) * (L + 1) + i], t = stage_time(c, i, j, s);
                if (prev == DBL_MAX || t > cap) continue;
                double x = prev + c->cut[(s - 1) * (L + 1) + i] + t;
                if (x < best) best = x, at = i;
            }
            v[s * (L + 1) + j] = best;
            c->arg[s * (L + 1) + j] = at;
        }
    return v[(pp - 1) * (L + 1) + L];
}

/* First layer of every stage from the last min_sum. */
static void read_cuts(const config *c, int *first)
{
    int L = c->p->n_layers, j = L;
    for (int s = c->pp - 1; s > 0; s--) {
        j = c->arg[s * (L + 1) + j];
        first[s] = j;
    }
    first[0] = 0;
}

static double bottleneck_of(const config *c, const int *first)
{
    double m = 0;
    for (int s = 0; s < c->pp; s++) {
        int end = s + 1 < c->pp ? first[s + 1] : c->p->n_layers;
        double t = stage_time(c, first[s], end, s);
        if (t > m) m = t;
    }
    return m;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Bottleneck values worth trying: stage times in (lo, hi), sorted. */
static int candidate_caps(const config *c, double lo, double hi, double **out)
{
    int L = c->p->n_layers, n = 0, cap = 1024;
    double *v = xmalloc((size_t)cap * sizeof *v);
    for (int s = 0; s < c->pp; s++)
        for (int i = s; i < L; i++)
            for (int j = i + 1; j <= L; j++) {
                double t = stage_time(c, i, j, s);
                if (t <= lo || t >= hi) continue;
                if (n == cap) v = xreallocarray(v, (size_t)(cap *= 2), sizeof *v);
                v[n++] = t;
            }
    if (!v) return -1;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *out = v;
    return n;
}

typedef struct cut_result {
    double pipeline;
    int exact;
} cut_result;

/* Best cuts for c into first[]; the pipeline time. */
static int best_cuts(config *c, int *first, int *tmp, cut_result *res)
{
    double B1 = c->B - 1, lstar = min_bottleneck(c);
    double gmin = min_sum(c, DBL_MAX);
    read_cuts(c, first);
    double best = B1 * bottleneck_of(c, first) + gmin, g = min_sum(c, lstar);
    read_cuts(c, tmp);
    if (g < DBL_MAX && B1 * bottleneck_of(c, tmp) + g < best)
        best = B1 * bottleneck_of(c, tmp) + g, memcpy(first, tmp, (size_t)c->pp * sizeof *first);
    *res = (cut_result){best, 1};
    if (B1 <= 0 || c->pp == 1) return 0;
    double *caps;
    int n = candidate_caps(c, lstar, (best - gmin) / B1, &caps);
    if (n < 0) return -1;
    for (int k = 0; k < n && B1 * caps[k] + gmin < best; k++) {
        if (k == AMP_MAX_TRIES) {
            res->exact = 0;
            break;
        }
        if (k > 0 && caps[k] == caps[k - 1]) continue;
        g = min_sum(c, caps[k]);
        if (g == DBL_MAX) continue;
        read_cuts(c, tmp);
        double f = B1 * bottleneck_of(c, tmp) + g;
        if (f < best) best = f, memcpy(first, tmp, (size_t)c->pp * sizeof *first);
    }
    free(caps);
    res->pipeline = best;
    return 0;
}

/* ---- one strategy ---- */

static double allreduce_ms(const config *c, const int *first)
{
    const amp_problem *p = c->p;
    if (c->dp == 1) return 0;
    double worst = 0;
    for (int s = 0; s < c->pp; s++) {
        int end = s + 1 < c->pp ? first[s + 1] : p->n_layers;
        double params = 0;
        for (int l = first[s]; l < end; l++)
            params += p->layers[l].params;
        double t = 2.0 * (c->dp - 1) / c->dp * params * p->bytes_per_param / c->mp / c->dp_link[s];
        if (t > worst) worst = t;
    }
    return worst;
}

static int evaluate(config *c, amp_strategy *out)
{
    int pp = c->pp;
    memset(out, 0, sizeof *out);
    out->first = xmalloc((size_t)pp * sizeof *out->first);
    out->stage_ms = xmalloc((size_t)pp * sizeof *out->stage_ms);
    out->speed = xmalloc((size_t)pp * sizeof *out->speed);
    int *tmp = xmalloc((size_t)pp * sizeof *tmp);
    cut_result cr;
    layout(c);
    prefix_sums(c);
    if (best_cuts(c, out->first, tmp, &cr) < 0) return free(tmp), -1;
    free(tmp);
    for (int s = 0; s < pp; s++) {
        int end = s + 1 < pp ? out->first[s + 1] : c->p->n_layers;
        out->stage_ms[s] = stage_time(c, out->first[s], end, s);
        out->speed[s] = c->speed[s];
    }
    out->mp = c->mp, out->dp = c->dp, out->pp = pp, out->mbs = c->mbs, out->micro_batches = c->B;
    out->pipeline_ms = cr.pipeline;
    out->allreduce_ms = allreduce_ms(c, out->first);
    out->iteration_ms = out->pipeline_ms + out->allreduce_ms;
    out->exact = cr.exact;
    return 0;
}

/* ---- enumeration and ranking ---- */

static void strategy_clear(amp_strategy *s)
{
    free(s->first);
    free(s->stage_ms);
    free(s->speed);
    memset(s, 0, sizeof *s);
}

void amp_strategies_free(amp_strategy *s, int n)
{
    for (int i = 0; s && i < n; i++)
        strategy_clear(&s[i]);
    free(s);
}

static int faster(const amp_strategy *a, const amp_strategy *b)
{
    if (a->iteration_ms != b->iteration_ms) return a->iteration_ms < b->iteration_ms;
    if (a->mp != b->mp) return a->mp < b->mp;
    if (a->pp != b->pp) return a->pp < b->pp;
    return a->mbs > b->mbs;
}

/* Keeps the k fastest in top[0..*n), sorted; takes ownership of s. */
static void keep(amp_strategy *top, int *n, int k, amp_strategy *s)
{
    if (*n == k && !faster(s, &top[k - 1])) {
        strategy_clear(s);
        return;
    }
    if (*n == k) strategy_clear(&top[--*n]);
    int i = (*n)++;
    while (i > 0 && faster(s, &top[i - 1])) {
        top[i] = top[i - 1];
        i--;
    }
    top[i] = *s;
}

static void config_alloc(config *c, const amp_problem *p)
{
    size_t L1 = (size_t)p->n_layers + 1, G = (size_t)p->nodes * p->gpus_per_node, P = G < L1 ? G : L1;
    c->p = p;
    c->speed = xcalloc(P, sizeof(double)), c->dp_link = xmalloc(P * sizeof(double));
    c->fw = xmalloc(L1 * sizeof(double)), c->tp = xmalloc(L1 * sizeof(double));
    c->cut = xcalloc(P * L1, sizeof(double)), c->val = xmalloc(P * L1 * sizeof(double)), c->arg = xmalloc(P * L1 * sizeof(int));
}

static void config_free(config *c)
{
    free(c->speed), free(c->dp_link), free(c->fw), free(c->tp), free(c->cut), free(c->val), free(c->arg);
}

/* Every mbs for (mp, dp); -1 when out of memory. */
static int try_batches(config *c, amp_strategy *top, int *n, int *evaluated)
{
    const amp_problem *p = c->p;
    if (p->global_batch % c->dp) return 0;
    int per_replica = p->global_batch / c->dp;
    for (int mbs = 1; mbs <= per_replica; mbs++) {
        if (per_replica % mbs) continue;
        c->mbs = mbs, c->B = per_replica / mbs;
        amp_strategy s;
        if (evaluate(c, &s) < 0) return strategy_clear(&s), -1;
        (*evaluated)++;
        keep(top, n, p->top_k, &s);
    }
    return 0;
}

int amp_search(const amp_problem *p, amp_strategy **out, int *evaluated)
{
    int G = p->nodes * p->gpus_per_node, n = 0, rc = 0;
    amp_strategy *top = xcalloc((size_t)p->top_k, sizeof *top);
    config c = {0};
    *evaluated = 0;
    config_alloc(&c, p);
    for (int mp = 1; rc == 0 && mp <= p->gpus_per_node; mp++) {
        if (p->gpus_per_node % mp) continue;
        for (int dp = 1; rc == 0 && dp <= G / mp; dp++) {
            if ((G / mp) % dp || G / (mp * dp) > p->n_layers) continue;
            c.mp = mp, c.dp = dp, c.pp = G / (mp * dp);
            rc = try_batches(&c, top, &n, evaluated);
        }
    }
    config_free(&c);
    if (rc < 0) {
        amp_strategies_free(top, n);
        return -1;
    }
    *out = top;
    return n;
}
