/* place_graph.h - the operator graph a placement job splits over devices.
 *
 * Owns: a place_graph (ops, edges, devices, communication model, adjacency
 * lists and one deterministic topological order), built from the JSON graph
 * format of DESIGN.md ("Graph format") and released with place_graph_free().
 * Parsing validates everything the algorithms rely on and names the bad field
 * by its JSON path, so a job's error can point at it. No I/O, no globals. */
#ifndef GANTRY_PLACE_GRAPH_H
#define GANTRY_PLACE_GRAPH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Limits a graph must respect (validated; beyond them parsing fails). */
#define PLACE_MAX_OPS 200000
#define PLACE_MAX_EDGES 1000000
#define PLACE_MAX_DEVICES 1024
#define PLACE_MAX_OUTPUTS 4096 /* entries of one op's output_bytes */
#define PLACE_MAX_NAME 256     /* bytes in an op, device or group name */
/* Largest size of one tensor, op memory field or edge: 1 TiB.  With the op
 * and edge limits above every sum the algorithms form stays far below
 * INT64_MAX, so byte arithmetic never overflows. */
#define PLACE_MAX_BYTES (INT64_C(1) << 40)
/* Largest device memory: 2^53, exactly representable as a JSON double. */
#define PLACE_MAX_DEVICE_BYTES (INT64_C(1) << 53)

/* Communication defaults when "comm" or one of its fields is absent:
 * Baechi's fitted linear model (134 us + bytes / 5701 bytes per us). */
#define PLACE_DEFAULT_LATENCY_US 134.0
#define PLACE_DEFAULT_BYTES_PER_US 5701.0

typedef struct place_op {
    char *name;
    double compute_us;        /* on a device of speed 1.0 */
    int64_t temp_bytes;       /* live while the op runs */
    int64_t persistent_bytes; /* weights: resident for the whole step */
    int64_t output_bytes;     /* sum of output_bytes[]: live from start to last consumer */
    int group;                /* index into group_names, or -1 */
} place_op;

typedef struct place_edge {
    int src, dst;  /* op indices */
    int64_t bytes; /* tensor size; defaults to the producer's output_bytes */
} place_edge;

typedef struct place_device {
    char *name;
    int64_t memory_bytes;
    double speed; /* an op takes compute_us / speed on this device */
} place_device;

typedef struct place_graph {
    int n_ops, n_edges, n_devices, n_groups;
    place_op *ops;
    place_edge *edges;
    place_device *devices;
    char **group_names;
    /* D x D, row = sender, column = receiver; a scalar is expanded. */
    double *latency_us;
    double *bytes_per_us;
    /* Adjacency in CSR form: edges out of op i are out_edge[out_off[i] ..
     * out_off[i+1]) in input order; likewise in_off/in_edge for edges in. */
    int *out_off, *out_edge;
    int *in_off, *in_edge;
    /* Kahn's order; among ready ops the one listed first in the input wins.
     * topo_pos[op] is the op's position in topo[]. */
    int *topo, *topo_pos;
} place_graph;

/* Builds a graph from `json` (the "graph" object).  `prefix` is the JSON path
 * of that object used in error fields (e.g. "spec.graph").  Returns NULL on a
 * bad graph with the path of the bad field in `field` and a message in `msg`
 * (the field may be the prefix itself, e.g. for a cycle: prefix + ".edges"). */
place_graph *place_graph_parse(const json_t *json, const char *prefix, char *field, size_t field_len, char *msg, size_t msg_len);
void place_graph_free(place_graph *g);

/* For graphs derived from a parsed one (co-placement, fusion): with ops,
 * edges, groups, devices and comm filled in, (re)builds the adjacency lists
 * and the topological order.  0, or -1 with a message (a cycle, out of
 * memory).  place_graph_free() releases a derived graph like a parsed one. */
int place_graph_index(place_graph *g, char *msg, size_t msg_len);
/* Deep-copies src's devices and communication matrices into dst (whose
 * devices/comm must be unset). */
void place_graph_copy_devices(place_graph *dst, const place_graph *src);

/* Time of op `op` on device `dev`, and of moving `bytes` from device `from`
 * to device `to` (0 when from == to). */
double place_op_time(const place_graph *g, int op, int dev);
double place_comm_time(const place_graph *g, int from, int to, int64_t bytes);

/* Memory an op is charged with when placement checks capacity:
 * persistent + output + temporary (see topo.c for why all three). */
int64_t place_op_memory(const place_graph *g, int op);

#endif
