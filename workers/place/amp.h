/* amp.h - AMP-style parallel strategy search (AMP, NeurIPS'22).
 *
 * Owns: an amp_problem (layers and cluster, amp_problem_free) and the
 * ranked strategies amp_search returns (amp_strategies_free).  Pure: no
 * I/O, no globals.  For nodes x gpus_per_node GPUs it enumerates the
 * tensor-parallel degree mp | gpus_per_node, the data-parallel degree
 * dp | GPUs / mp, the pipeline depth pp = GPUs / (mp * dp) and the
 * micro-batch size mbs | global_batch / dp; cuts the layers into pp stages
 * by dynamic programming; and ranks the strategies by predicted iteration
 * time (cost model at the top of amp.c).  A spec {"strategy": {...}} and
 * `gantry-place --strategy FILE` run it. */
#ifndef GANTRY_PLACE_AMP_H
#define GANTRY_PLACE_AMP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define AMP_MAX_LAYERS 4096
#define AMP_MAX_GPUS 4096
#define AMP_MAX_BATCH (1 << 24)
#define AMP_DEFAULT_TOP_K 10
#define AMP_DEFAULT_BYTES_PER_PARAM 2.0 /* fp16 gradients, as AMP's mixed-precision runs */

typedef struct amp_layer {
    char *name;
    double forward_ms;       /* forward pass at micro-batch 1, mp = 1, GPU speed 1 */
    double params;           /* parameter count */
    double activation_bytes; /* output activation at micro-batch 1 */
} amp_layer;

typedef struct amp_problem {
    int n_layers;
    amp_layer *layers;
    int nodes, gpus_per_node;
    double intra_gbps, inter_gbps;
    double *gpu_speed; /* nodes * gpus_per_node, in rank order (node-major) */
    int global_batch;
    int top_k;
    double bytes_per_param;
} amp_problem;

typedef struct amp_strategy {
    int mp, dp, pp, mbs, micro_batches;
    double iteration_ms, pipeline_ms, allreduce_ms;
    int exact;        /* 0 when the stage-cut search hit its candidate cap (amp.c) */
    int *first;       /* pp entries: first layer of each stage */
    double *stage_ms; /* pp entries: one micro-batch's forward + backward time of each stage */
    double *speed;    /* pp entries: speed of each stage (its slowest GPU) */
} amp_strategy;

/* Parses and validates the "strategy" object; NULL with the JSON path of
 * the bad field (prefix + ".layers[3].forward_ms") and a message. */
amp_problem *amp_problem_parse(const json_t *j, const char *prefix, char *field, size_t field_len, char *msg, size_t msg_len);
void amp_problem_free(amp_problem *p);

/* The best min(top_k, feasible) strategies, fastest first, in *out (count
 * returned; -1 when out of memory); *evaluated counts every (mp, dp, pp,
 * mbs) tried. */
int amp_search(const amp_problem *p, amp_strategy **out, int *evaluated);
void amp_strategies_free(amp_strategy *s, int n);

/* Parse, search, and the result JSON {"best", "strategies", "metrics"};
 * NULL with "field: message" in err. */
json_t *amp_solve(const json_t *strategy, const char *prefix, char *err, size_t err_len);

#endif
