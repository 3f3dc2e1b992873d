/* amp_problem.h - the AMP strategy search's problem (AMP, NeurIPS'22): the layers and the
 * cluster of a spec's "strategy" object (or gantry-place --strategy FILE), parsed and
 * validated (amp_problem.c).  The spec module validates a strategy with it; the search itself
 * (amp_search, amp_solve) is the placement library's (workers/place/amp.h), which the server
 * does not link.  Owns: an amp_problem (amp_problem_free).  Pure: jansson only. */
#ifndef GANTRY_SPEC_AMP_PROBLEM_H
#define GANTRY_SPEC_AMP_PROBLEM_H

#include <jansson.h>
#include <stddef.h>

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

/* Parses and validates the "strategy" object; NULL with the JSON path of
 * the bad field (prefix + ".layers[3].forward_ms") and a message. */
amp_problem *amp_problem_parse(const json_t *j, const char *prefix, char *field, size_t field_len, char *msg, size_t msg_len);
void amp_problem_free(amp_problem *p);

#endif
