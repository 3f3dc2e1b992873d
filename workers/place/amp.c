/* amp.c - the strategy search: cost model, stage cuts, ranking.
 *
 * Layout.  GPU rank r = node * gpus_per_node + local.  Pipeline stage s
 * holds ranks [s * mp * dp, (s + 1) * mp * dp); inside it data-parallel
 * replica k holds the mp consecutive ranks from s * mp * dp + k * mp.  As
 * mp divides gpus_per_node, a tensor-parallel group never leaves a node.
 * A stage runs at the speed of its slowest GPU (its replicas and shards
 * wait for each other).  link(a, b) is the bandwidth from node a to node b
 * (amp_link_gbps: the matrix, or intra when a == b and inter otherwise).
 *
 * Cost of (mp, dp, pp, mbs), with B = global_batch / (dp * mbs)
 * micro-batches (times in ms, bandwidths in bytes/ms):
 *   t_fwd(l, s) = forward_ms(l) / (mp * speed(s))
 *                 + [mp > 1] 2 * 2 (mp - 1) / mp * activation_bytes(l) / intra(s)
 *                 (two ring all-reduces of the layer's activation per
 *                 forward pass, as Megatron's tensor parallelism does;
 *                 intra(s): the slowest link(n, n) of the stage's nodes)
 *   e(l, s)     = 3 * mbs * t_fwd(l, s)              (backward ~ 2x forward)
 *   S(s)        = sum of e(l, s) over the stage's layers
 *   c(s)        = 2 * mbs * activation_bytes(last layer of s) / link(s, s+1)
 *                 (activation forward, its gradient back; link(s, s+1) is
 *                 the slowest link(node(r), node(r + mp * dp)) over the
 *                 ranks r of stage s: replica k sends to replica k)
 *   pipeline    = (B - 1) * max_s S(s) + sum_s S(s) + sum_s c(s)
 *   all-reduce  = max over stages of 2 (dp - 1) / dp * params(s) *
 *                 bytes_per_param / mp / ring(s)
 *                 (stages reduce in parallel; AMP's formula with the
 *                 stage's own parameters; ring(s): the slowest link of the
 *                 ring replica 0 -> 1 -> ... -> dp - 1 -> 0)
 *   iteration   = pipeline + all-reduce.
 *
 * Memory of each GPU of stage s holding layers i..j-1 (1F1B schedule, as
 * DeepSpeed's and Megatron's pipelines run: stage s keeps the activations
 * of min(pp - s, B) micro-batches until their backward passes):
 *   mem(s) = params(i..j) / mp * state_bytes_per_param
 *            + min(pp - s, B) * mbs * stash_bytes(i..j) / mp
 * (tensor parallelism taken to split activations as well as weights).  A
 * cut is allowed only if mem(s) <= the smallest memory of the stage's
 * GPUs for every s: a stage that does not fit costs +inf below, so the
 * DPs never pick it and a strategy with no fitting cut is rejected.
 *
 * Stage cuts.  The objective (B - 1) * max + sum does not split over
 * stages, so: (1) a min-max DP gives the smallest bottleneck L*; (2) a DP
 * minimising sum + cut communication under a bottleneck cap L gives g(L),
 * non-increasing in L; g(inf) = g_min.  The optimum's bottleneck is one of
 * the stage times S(i..j, s), so trying those values from L* upwards and
 * stopping once (B - 1) * L + g_min cannot beat the best found is exact;
 * at most AMP_MAX_TRIES values are tried per strategy (else it is marked
 * inexact; with B = 1 no value needs trying).  Each DP is O(pp * L^2).
 * partition "uniform" skips all this and gives every stage L / pp layers
 * (Megatron's default), the baseline the case study compares with. */
#include "workers/place/amp.h"

#include "common/alloc.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AMP_MAX_TRIES 256
#define GBPS_TO_BYTES_PER_MS 125000.0

typedef struct config {
    const amp_problem *p;
    int mp, dp, pp, mbs, B;
    double *speed;          /* per stage */
    double *tp_ms_per_byte; /* per stage: tensor-parallel ms per activation byte */
    double *mem_limit;      /* per stage: smallest GPU memory (DBL_MAX: unchecked) */
    double *fw, *act;       /* prefix sums over layers: forward ms, activation bytes */
    double *par, *stash;    /* prefix sums over layers: parameters, stashed bytes */
    double *cut;            /* per (stage s, layer i): communication of a cut after layer i - 1 leaving stage s */
    double *dp_link;        /* per stage: bandwidth of its data-parallel ring */
    /* DP tables, (pp) x (L + 1) */
    double *val;
    int *arg;
} config;

/* ---- the cost model ---- */

/* Peak bytes on each GPU of stage s holding layers i..j-1. */
static double stage_memory(const config *c, int i, int j, int s)
{
    int in_flight = c->pp - s < c->B ? c->pp - s : c->B;
    return ((c->par[j] - c->par[i]) * c->p->state_bytes_per_param + (double)in_flight * c->mbs * (c->stash[j] - c->stash[i])) /
           c->mp;
}

/* One micro-batch's forward + backward time of stage s holding layers
 * i..j-1; +inf when it does not fit the stage's GPUs. */
static double stage_time(const config *c, int i, int j, int s)
{
    if (c->mem_limit[s] < DBL_MAX && stage_memory(c, i, j, s) > c->mem_limit[s]) return HUGE_VAL;
    double fwd = (c->fw[j] - c->fw[i]) / (c->mp * c->speed[s]) + (c->act[j] - c->act[i]) * c->tp_ms_per_byte[s];
    return 3.0 * c->mbs * fwd;
}

double amp_link_gbps(const amp_problem *p, int a, int b)
{
    if (p->link_gbps) return p->link_gbps[(size_t)a * p->nodes + b];
    return a == b ? p->intra_gbps : p->inter_gbps;
}

/* bytes per ms from the node of rank a to the node of rank b */
static double link(const amp_problem *p, int a, int b)
{
    return amp_link_gbps(p, a / p->gpus_per_node, b / p->gpus_per_node) * GBPS_TO_BYTES_PER_MS;
}

static double min_of(double a, double b)
{
    return a < b ? a : b;
}

static void layout(config *c)
{
    const amp_problem *p = c->p;
    int width = c->mp * c->dp;
    for (int s = 0; s < c->pp; s++) {
        double speed = DBL_MAX, mem = DBL_MAX, intra = DBL_MAX, ring = DBL_MAX;
        for (int r = s * width; r < (s + 1) * width; r++) {
            speed = min_of(speed, p->gpu_speed[r]);
            if (p->gpu_memory) mem = min_of(mem, p->gpu_memory[r]);
            intra = min_of(intra, link(p, r, r));
        }
        for (int k = 0; k < c->dp; k++)
            ring = min_of(ring, link(p, s * width + k * c->mp, s * width + (k + 1) % c->dp * c->mp));
        c->speed[s] = speed, c->mem_limit[s] = mem, c->dp_link[s] = ring;
        c->tp_ms_per_byte[s] = c->mp > 1 ? 2.0 * 2.0 * (c->mp - 1) / c->mp / intra : 0;
    }
}

static void prefix_sums(config *c)
{
    const amp_problem *p = c->p;
    c->fw[0] = c->act[0] = c->par[0] = c->stash[0] = 0;
    for (int l = 0; l < p->n_layers; l++) {
        c->fw[l + 1] = c->fw[l] + p->layers[l].forward_ms;
        c->act[l + 1] = c->act[l] + p->layers[l].activation_bytes;
        c->par[l + 1] = c->par[l] + p->layers[l].params;
        c->stash[l + 1] = c->stash[l] + p->layers[l].stash_bytes;
    }
    int L = p->n_layers, width = c->mp * c->dp;
    for (int s = 0; s + 1 < c->pp; s++) {
        double bw = DBL_MAX;
        for (int r = s * width; r < (s + 1) * width; r++)
            bw = min_of(bw, link(p, r, r + width));
        for (int i = 1; i <= L; i++)
            c->cut[s * (L + 1) + i] = 2.0 * c->mbs * p->layers[i - 1].activation_bytes / bw;
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

/* Equal layer counts (the first stages one fewer when pp does not divide
 * L) into first[]; 1 when a stage does not fit. */
static int uniform_cuts(config *c, int *first, cut_result *res)
{
    int L = c->p->n_layers, pp = c->pp;
    double sum = 0, max = 0;
    for (int s = 0; s < pp; s++)
        first[s] = (int)((long)s * L / pp);
    for (int s = 0; s < pp; s++) {
        int end = s + 1 < pp ? first[s + 1] : L;
        double t = stage_time(c, first[s], end, s);
        if (t == HUGE_VAL) return 1;
        sum += t + (s + 1 < pp ? c->cut[s * (L + 1) + end] : 0);
        if (t > max) max = t;
    }
    *res = (cut_result){(c->B - 1) * max + sum, 1};
    return 0;
}

/* Best cuts for c into first[] and the pipeline time; 1 when no cut fits
 * the GPUs' memory, -1 when out of memory. */
static int best_cuts(config *c, int *first, int *tmp, cut_result *res)
{
    if (c->p->partition == AMP_PARTITION_UNIFORM) return uniform_cuts(c, first, res);
    double B1 = c->B - 1, lstar = min_bottleneck(c);
    double gmin = min_sum(c, DBL_MAX);
    if (gmin == DBL_MAX) return 1;
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

/* 0 with the strategy in *out, 1 when no cut fits the GPUs' memory, -1
 * when out of memory. */
static int evaluate(config *c, amp_strategy *out)
{
    int pp = c->pp;
    memset(out, 0, sizeof *out);
    out->first = xmalloc((size_t)pp * sizeof *out->first);
    out->stage_ms = xmalloc((size_t)pp * sizeof *out->stage_ms);
    out->speed = xmalloc((size_t)pp * sizeof *out->speed);
    out->memory = xmalloc((size_t)pp * sizeof *out->memory);
    int *tmp = xmalloc((size_t)pp * sizeof *tmp);
    cut_result cr;
    layout(c);
    prefix_sums(c);
    int rc = best_cuts(c, out->first, tmp, &cr);
    free(tmp);
    if (rc != 0) return rc;
    for (int s = 0; s < pp; s++) {
        int end = s + 1 < pp ? out->first[s + 1] : c->p->n_layers;
        out->stage_ms[s] = stage_time(c, out->first[s], end, s);
        out->speed[s] = c->speed[s];
        out->memory[s] = stage_memory(c, out->first[s], end, s);
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
    free(s->memory);
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
    c->tp_ms_per_byte = xmalloc(P * sizeof(double)), c->mem_limit = xmalloc(P * sizeof(double));
    c->fw = xmalloc(L1 * sizeof(double)), c->act = xmalloc(L1 * sizeof(double));
    c->par = xmalloc(L1 * sizeof(double)), c->stash = xmalloc(L1 * sizeof(double));
    c->cut = xcalloc(P * L1, sizeof(double)), c->val = xmalloc(P * L1 * sizeof(double)), c->arg = xmalloc(P * L1 * sizeof(int));
}

static void config_free(config *c)
{
    free(c->speed), free(c->dp_link), free(c->tp_ms_per_byte), free(c->mem_limit);
    free(c->fw), free(c->act), free(c->par), free(c->stash), free(c->cut), free(c->val), free(c->arg);
}

/* Every mbs for (mp, dp); -1 when out of memory. */
static int try_batches(config *c, amp_strategy *top, int *n, int *evaluated, int *rejected)
{
    const amp_problem *p = c->p;
    if (p->global_batch % c->dp) return 0;
    int per_replica = p->global_batch / c->dp;
    for (int mbs = 1; mbs <= per_replica; mbs++) {
        if (per_replica % mbs) continue;
        c->mbs = mbs, c->B = per_replica / mbs;
        amp_strategy s;
        int rc = evaluate(c, &s);
        if (rc < 0) return strategy_clear(&s), -1;
        (*evaluated)++;
        if (rc == 1) {
            (*rejected)++;
            strategy_clear(&s);
            continue;
        }
        keep(top, n, p->top_k, &s);
    }
    return 0;
}

int amp_search(const amp_problem *p, amp_strategy **out, int *evaluated, int *rejected)
{
    int G = p->nodes * p->gpus_per_node, n = 0, rc = 0;
    amp_strategy *top = xcalloc((size_t)p->top_k, sizeof *top);
    config c = {0};
    *evaluated = *rejected = 0;
    config_alloc(&c, p);
    for (int mp = 1; rc == 0 && mp <= p->gpus_per_node; mp++) {
        if (p->gpus_per_node % mp) continue;
        for (int dp = 1; rc == 0 && dp <= G / mp; dp++) {
            if ((G / mp) % dp || G / (mp * dp) > p->n_layers) continue;
            c.mp = mp, c.dp = dp, c.pp = G / (mp * dp);
            rc = try_batches(&c, top, &n, evaluated, rejected);
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
