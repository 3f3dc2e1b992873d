/* amp.h - AMP-style parallel strategy search (AMP, NeurIPS'22).
 *
 * Owns: the ranked strategies amp_search returns (amp_strategies_free);
 * the problem (layers and cluster) is spec/amp_problem.h's.  Pure: no
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

#include "spec/amp_problem.h"

typedef struct amp_strategy {
    int mp, dp, pp, mbs, micro_batches;
    double iteration_ms, pipeline_ms, allreduce_ms;
    int exact;        /* 0 when the stage-cut search hit its candidate cap (amp.c) */
    int *first;       /* pp entries: first layer of each stage */
    double *stage_ms; /* pp entries: one micro-batch's forward + backward time of each stage */
    double *speed;    /* pp entries: speed of each stage (its slowest GPU) */
    double *memory;   /* pp entries: peak bytes on each GPU of the stage */
} amp_strategy;

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
