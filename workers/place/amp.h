/* amp.h - AMP-style parallel strategy search (AMP, NeurIPS'22).
 *
 * Owns: an amp_problem (layers and cluster, amp_problem_free) and the
 * ranked strategies amp_search returns (amp_strategies_free).  Pure: no
 * I/O, no globals.  For nodes x gpus_per_node GPUs it enumerates the
 * tensor-parallel degree mp | gpus_per_node, the data-parallel degree
 * dp | GPUs / mp, the pipeline depth pp = GPUs / (mp * dp) and the
 * micro-batch size mbs | global_batch / dp; cuts the layers into pp stages
 * by dynamic programming; and ranks the strategies by predicted iteration
 * time (cost model at the top of amp.c).  Links are per node pair (a
 * nodes x nodes bandwidth matrix, or intra/inter as its shorthand), GPUs
 * have their own speed and memory, and a stage cut whose per-GPU memory
 * (parameters with their gradients and optimizer state, activations of the
 * micro-batches in flight) exceeds its GPUs' memory is never chosen: a
 * strategy with no cut that fits is rejected and counted.  A spec
 * {"strategy": {...}} and `gantry-place --strategy FILE` run it. */
#ifndef GANTRY_PLACE_AMP_H
#define GANTRY_PLACE_AMP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define AMP_MAX_LAYERS 4096
#define AMP_MAX_GPUS 4096
#define AMP_MAX_BATCH (1 << 24)
#define AMP_DEFAULT_TOP_K 10
#define AMP_MAX_MATRIX_NODES 256        /* nodes a bandwidth matrix may describe */
#define AMP_DEFAULT_BYTES_PER_PARAM 2.0 /* fp16 gradients, as AMP's mixed-precision runs */
/* fp16 weights and gradients, fp32 master weights and Adam's two moments
 * (2 + 2 + 4 + 4 + 4 bytes; ZeRO's count for mixed-precision Adam) */
#define AMP_DEFAULT_STATE_BYTES_PER_PARAM 16.0

typedef struct amp_layer {
    char *name;
    double forward_ms;       /* forward pass at micro-batch 1, mp = 1, GPU speed 1 */
    double params;           /* parameter count */
    double activation_bytes; /* output activation at micro-batch 1 */
    double stash_bytes;      /* what one sample keeps for the backward pass (default activation_bytes) */
} amp_layer;

/* how stages are cut: the searched cut (AMP's DP), or equal layer counts
 * (Megatron's default, a baseline to compare with) */
typedef enum amp_partition { AMP_PARTITION_BALANCED, AMP_PARTITION_UNIFORM } amp_partition;

typedef struct amp_problem {
    int n_layers;
    amp_layer *layers;
    int nodes, gpus_per_node;
    double intra_gbps, inter_gbps; /* used when link_gbps is NULL */
    double *link_gbps;             /* NULL or nodes x nodes: [a * nodes + b] from node a to b, [a * nodes + a] inside a */
    double *gpu_speed;             /* nodes * gpus_per_node, in rank order (node-major) */
    double *gpu_memory;            /* NULL (unchecked) or bytes per GPU, in rank order */
    int global_batch;
    int top_k;
    double bytes_per_param;       /* gradient bytes all-reduced per parameter */
    double state_bytes_per_param; /* resident bytes per parameter: weights, gradients, optimizer state */
    amp_partition partition;
} amp_problem;

typedef struct amp_strategy {
    int mp, dp, pp, mbs, micro_batches;
    double iteration_ms, pipeline_ms, allreduce_ms;
    int exact;        /* 0 when the stage-cut search hit its candidate cap (amp.c) */
    int *first;       /* pp entries: first layer of each stage */
    double *stage_ms; /* pp entries: one micro-batch's forward + backward time of each stage */
    double *speed;    /* pp entries: speed of each stage (its slowest GPU) */
    double *memory;   /* pp entries: peak bytes on each GPU of the stage */
} amp_strategy;

/* Parses and validates the "strategy" object; NULL with the JSON path of
 * the bad field (prefix + ".layers[3].forward_ms") and a message. */
amp_problem *amp_problem_parse(const json_t *j, const char *prefix, char *field, size_t field_len, char *msg, size_t msg_len);
void amp_problem_free(amp_problem *p);

/* The best min(top_k, feasible) strategies, fastest first, in *out (count
 * returned; -1 when out of memory); *evaluated counts every (mp, dp, pp,
 * mbs) tried, *rejected those of them with no stage cut that fits the
 * GPUs' memory. */
int amp_search(const amp_problem *p, amp_strategy **out, int *evaluated, int *rejected);

/* Bandwidth in Gbit/s from node a to node b (a == b: inside the node). */
double amp_link_gbps(const amp_problem *p, int a, int b);
void amp_strategies_free(amp_strategy *s, int n);

/* Parse, search, and the result JSON {"best", "strategies", "metrics"};
 * NULL with "field: message" in err. */
json_t *amp_solve(const json_t *strategy, const char *prefix, char *err, size_t err_len);

#endif
