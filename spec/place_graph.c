/* place_graph.c - parse and validate an operator graph, build adjacency and a
 * topological order.
 *
 * Validation happens once, here, so the algorithms and the simulator can
 * trust every index and number they read.  Errors name the JSON path of the
 * offending field ("spec.graph.ops[3].compute_us") because users fix graphs
 * by looking at that field.  Unknown fields are ignored: graphs exported by
 * other tools carry extra attributes.
 *
 * The topological order is Kahn's algorithm with a min-heap on the input
 * index, i.e. the lexicographically smallest order: deterministic, and for a
 * graph listed in execution order it is the listed order. */
#include "spec/place_graph.h"

#include "common/alloc.h"
#include "common/utf8.h"
#include "common/fielderr.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- error reporting ---- */

/* ---- name -> index map (open addressing, FNV-1a); keys are borrowed ---- */

typedef struct strmap {
    const char **keys;
    int *vals;
    size_t cap; /* power of two, at least twice the entries */
} strmap;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void strmap_init(strmap *m, size_t n)
{
    m->cap = 16;
    while (m->cap < 2 * n + 1)
        m->cap *= 2;
    m->keys = xcalloc(m->cap, sizeof *m->keys);
    m->vals = xcalloc(m->cap, sizeof *m->vals);
}

static void strmap_free(strmap *m)
{
    free(m->keys);
    free(m->vals);
}

/* Returns the slot holding `key` or the empty slot where it belongs. */
static size_t strmap_slot(const strmap *m, const char *key)
{
    size_t i = hash_str(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int strmap_get(const strmap *m, const char *key)
{
    size_t i = strmap_slot(m, key);
    return m->keys[i] ? m->vals[i] : -1;
}

/* Inserts key -> val unless present; returns the value already stored or -1. */
static int strmap_put(strmap *m, const char *key, int val)
{
    size_t i = strmap_slot(m, key);
    if (m->keys[i]) return m->vals[i];
    m->keys[i] = key;
    m->vals[i] = val;
    return -1;
}

/* ---- field readers ---- */

static int read_name(fielderr *e, const json_t *obj, const char *where, char **out)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, "%s.name", where);
    const json_t *v = json_object_get(obj, "name");
    if (!v) return fielderr_fail(e, suffix, "is required");
    if (!json_is_string(v)) return fielderr_fail(e, suffix, "must be a string");
    size_t len = json_string_length(v);
    if (len == 0) return fielderr_fail(e, suffix, "must not be empty");
    if (len >= PLACE_MAX_NAME) return fielderr_fail(e, suffix, "must be shorter than %d bytes", PLACE_MAX_NAME);
    if (memchr(json_string_value(v), '\0', len)) return fielderr_fail(e, suffix, "must not contain NUL characters");
    *out = xstrdup(json_string_value(v));
    return 0;
}

/* A non-negative finite number. `v` may be NULL (absent) when def >= 0. */
/* Bounds that keep every sum and ratio of a 200k-op schedule finite (a makespan of inf
 * would drop fields from the result). */
#define PLACE_MAX_VALUE 1e15
#define PLACE_MIN_POSITIVE 1e-9

static int read_nonneg(fielderr *e, const json_t *v, const char *suffix, double def, double *out)
{
    if (!v) {
        if (def < 0) return fielderr_fail(e, suffix, "is required");
        *out = def;
        return 0;
    }
    if (!json_is_number(v)) return fielderr_fail(e, suffix, "must be a non-negative number");
    double d = json_number_value(v);
    if (!isfinite(d) || d < 0) return fielderr_fail(e, suffix, "must be a non-negative number");
    if (d > PLACE_MAX_VALUE) return fielderr_fail(e, suffix, "must be at most 1e15");
    *out = d;
    return 0;
}

static int read_positive(fielderr *e, const json_t *v, const char *suffix, double def, double *out)
{
    if (!v) {
        *out = def;
        return 0;
    }
    double d = json_is_number(v) ? json_number_value(v) : -1;
    if (!isfinite(d) || d <= 0) return fielderr_fail(e, suffix, "must be a positive number");
    if (d < PLACE_MIN_POSITIVE || d > PLACE_MAX_VALUE) return fielderr_fail(e, suffix, "must be between 1e-9 and 1e15");
    *out = d;
    return 0;
}

/* A byte count: a non-negative whole number no larger than `max`. */
static int read_bytes(fielderr *e, const json_t *v, const char *suffix, int64_t max, int64_t *out)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0) return fielderr_fail(e, suffix, "must be a non-negative integer (bytes)");
        if (i > max) return fielderr_fail(e, suffix, "must be at most %lld bytes", (long long)max);
        *out = (int64_t)i;
        return 0;
    }
    if (!json_is_real(v)) return fielderr_fail(e, suffix, "must be a non-negative integer (bytes)");
    double d = json_real_value(v);
    if (!isfinite(d) || d < 0 || d != floor(d)) return fielderr_fail(e, suffix, "must be a non-negative integer (bytes)");
    if (d > (double)max) return fielderr_fail(e, suffix, "must be at most %lld bytes", (long long)max);
    *out = (int64_t)d;
    return 0;
}

static int read_opt_bytes(fielderr *e, const json_t *obj, const char *key, const char *where, int64_t *out)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, "%s.%s", where, key);
    const json_t *v = json_object_get(obj, key);
    *out = 0;
    if (!v || json_is_null(v)) return 0;
    return read_bytes(e, v, suffix, PLACE_MAX_BYTES, out);
}

/* output_bytes: an array of per-port sizes (a single number is accepted). */
static int read_outputs(fielderr *e, const json_t *obj, const char *where, int64_t *out)
{
    char suffix[96];
    snprintf(suffix, sizeof suffix, "%s.output_bytes", where);
    const json_t *v = json_object_get(obj, "output_bytes");
    *out = 0;
    if (!v || json_is_null(v)) return 0;
    if (json_is_number(v)) return read_bytes(e, v, suffix, PLACE_MAX_BYTES, out);
    if (!json_is_array(v)) return fielderr_fail(e, suffix, "must be an array of byte counts");
    if (json_array_size(v) > PLACE_MAX_OUTPUTS) return fielderr_fail(e, suffix, "must have at most %d entries", PLACE_MAX_OUTPUTS);
    size_t i;
    const json_t *x;
    json_array_foreach(v, i, x)
    {
        char item[128];
        int64_t b = 0;
        snprintf(item, sizeof item, "%s[%zu]", suffix, i);
        if (read_bytes(e, x, item, PLACE_MAX_BYTES, &b) < 0) return -1;
        *out += b;
    }
    if (*out > PLACE_MAX_BYTES) return fielderr_fail(e, suffix, "sum must be at most %lld bytes", (long long)PLACE_MAX_BYTES);
    return 0;
}

static const json_t *get_array(fielderr *e, const json_t *graph, const char *key, size_t max)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, ".%s", key);
    const json_t *a = json_object_get(graph, key);
    if (!a) return fielderr_set(e, suffix, "is required"), NULL;
    if (!json_is_array(a)) return fielderr_set(e, suffix, "must be an array"), NULL;
    if (json_array_size(a) > max) return fielderr_set(e, suffix, "must have at most %zu entries", max), NULL;
    return a;
}

/* ---- sections ---- */

static int parse_group(fielderr *e, place_graph *g, strmap *groups, const json_t *obj, const char *where, place_op *op)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, "%s.group", where);
    const json_t *v = json_object_get(obj, "group");
    op->group = -1;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v) || json_string_length(v) == 0) return fielderr_fail(e, suffix, "must be a non-empty string");
    if (memchr(json_string_value(v), '\0', json_string_length(v)))
        return fielderr_fail(e, suffix, "must not contain NUL characters");
    if (json_string_length(v) >= PLACE_MAX_NAME) return fielderr_fail(e, suffix, "must be shorter than %d bytes", PLACE_MAX_NAME);
    int id = strmap_get(groups, json_string_value(v));
    if (id >= 0) {
        op->group = id;
        return 0;
    }
    char *name = xstrdup(json_string_value(v));
    g->group_names[g->n_groups] = name;
    strmap_put(groups, name, g->n_groups);
    op->group = g->n_groups++;
    return 0;
}

static int parse_op(fielderr *e, place_graph *g, strmap *names, strmap *groups, const json_t *obj, int i)
{
    char where[32], suffix[64];
    snprintf(where, sizeof where, ".ops[%d]", i);
    if (!json_is_object(obj)) return fielderr_fail(e, where, "must be an object");
    place_op *op = &g->ops[i];
    if (read_name(e, obj, where, &op->name) < 0) return -1;
    g->n_ops = i + 1; /* the name is owned from here on */
    int prev = strmap_put(names, op->name, i);
    snprintf(suffix, sizeof suffix, "%s.name", where);
    if (prev >= 0) return fielderr_fail(e, suffix, "duplicate op name '%s' (also ops[%d])", op->name, prev);
    snprintf(suffix, sizeof suffix, "%s.compute_us", where);
    if (read_nonneg(e, json_object_get(obj, "compute_us"), suffix, -1, &op->compute_us) < 0) return -1;
    if (read_opt_bytes(e, obj, "temp_bytes", where, &op->temp_bytes) < 0) return -1;
    if (read_opt_bytes(e, obj, "persistent_bytes", where, &op->persistent_bytes) < 0) return -1;
    if (read_outputs(e, obj, where, &op->output_bytes) < 0) return -1;
    return parse_group(e, g, groups, obj, where, op);
}

static int parse_ops(fielderr *e, place_graph *g, strmap *names, const json_t *graph)
{
    const json_t *a = get_array(e, graph, "ops", PLACE_MAX_OPS);
    if (!a) return -1;
    size_t n = json_array_size(a);
    if (n == 0) return fielderr_fail(e, ".ops", "must contain at least one op");
    g->ops = xcalloc(n, sizeof *g->ops);
    g->group_names = xcalloc(n, sizeof *g->group_names);
    strmap groups = {0};
    strmap_init(names, n);
    strmap_init(&groups, n);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = parse_op(e, g, names, &groups, json_array_get(a, i), (int)i);
    strmap_free(&groups);
    return rc;
}

static int edge_end(fielderr *e, const strmap *names, const json_t *obj, const char *where, const char *key, int *out)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, "%s.%s", where, key);
    const json_t *v = json_object_get(obj, key);
    if (!v) return fielderr_fail(e, suffix, "is required");
    if (!json_is_string(v)) return fielderr_fail(e, suffix, "must be an op name (string)");
    *out = -1;
    if (!memchr(json_string_value(v), '\0', json_string_length(v))) *out = strmap_get(names, json_string_value(v));
    if (*out < 0) {
        char name[201]; /* cut to fit without splitting a character */
        utf8_copy(name, sizeof(name), json_string_value(v));
        return fielderr_fail(e, suffix, "no op named '%s'", name);
    }
    return 0;
}

static int parse_edge(fielderr *e, place_graph *g, const strmap *names, const json_t *obj, int i)
{
    char where[32], suffix[64];
    snprintf(where, sizeof where, ".edges[%d]", i);
    if (!json_is_object(obj)) return fielderr_fail(e, where, "must be an object");
    place_edge *ed = &g->edges[i];
    if (edge_end(e, names, obj, where, "src", &ed->src) < 0) return -1;
    if (edge_end(e, names, obj, where, "dst", &ed->dst) < 0) return -1;
    const json_t *b = json_object_get(obj, "bytes");
    snprintf(suffix, sizeof suffix, "%s.bytes", where);
    ed->bytes = g->ops[ed->src].output_bytes;
    if (b && !json_is_null(b) && read_bytes(e, b, suffix, PLACE_MAX_BYTES, &ed->bytes) < 0) return -1;
    return 0;
}

static int parse_edges(fielderr *e, place_graph *g, const strmap *names, const json_t *graph)
{
    const json_t *present = json_object_get(graph, "edges");
    if (!present || json_is_null(present)) return 0; /* a graph of independent ops */
    const json_t *a = get_array(e, graph, "edges", PLACE_MAX_EDGES);
    if (!a) return -1;
    size_t n = json_array_size(a);
    g->edges = xcalloc(n ? n : 1, sizeof *g->edges);
    for (size_t i = 0; i < n; i++)
        if (parse_edge(e, g, names, json_array_get(a, i), (int)i) < 0) return -1;
    g->n_edges = (int)n;
    return 0;
}

static int parse_device(fielderr *e, place_graph *g, strmap *names, const json_t *obj, int i)
{
    char where[32], suffix[64];
    snprintf(where, sizeof where, ".devices[%d]", i);
    if (!json_is_object(obj)) return fielderr_fail(e, where, "must be an object");
    place_device *d = &g->devices[i];
    if (read_name(e, obj, where, &d->name) < 0) return -1;
    g->n_devices = i + 1;
    snprintf(suffix, sizeof suffix, "%s.name", where);
    int prev = strmap_put(names, d->name, i);
    if (prev >= 0) return fielderr_fail(e, suffix, "duplicate device name '%s' (also devices[%d])", d->name, prev);
    snprintf(suffix, sizeof suffix, "%s.memory_bytes", where);
    const json_t *m = json_object_get(obj, "memory_bytes");
    if (!m) return fielderr_fail(e, suffix, "is required");
    if (read_bytes(e, m, suffix, PLACE_MAX_DEVICE_BYTES, &d->memory_bytes) < 0) return -1;
    snprintf(suffix, sizeof suffix, "%s.speed", where);
    return read_positive(e, json_object_get(obj, "speed"), suffix, 1.0, &d->speed);
}

static int parse_devices(fielderr *e, place_graph *g, const json_t *graph)
{
    const json_t *a = get_array(e, graph, "devices", PLACE_MAX_DEVICES);
    if (!a) return -1;
    size_t n = json_array_size(a);
    if (n == 0) return fielderr_fail(e, ".devices", "must contain at least one device");
    strmap names = {0};
    g->devices = xcalloc(n, sizeof *g->devices);
    strmap_init(&names, n);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = parse_device(e, g, &names, json_array_get(a, i), (int)i);
    strmap_free(&names);
    return rc;
}

/* One comm field: a number for every link, or a D x D matrix (row = sender).
 * The diagonal is read but never used: a device does not send to itself. */
static int parse_link_value(fielderr *e, const json_t *v, const char *key, double def, int positive, int D, double *out)
{
    char suffix[80];
    snprintf(suffix, sizeof suffix, ".comm.%s", key);
    double x = def;
    if (!v || json_is_number(v)) {
        int rc = positive ? read_positive(e, v, suffix, def, &x) : read_nonneg(e, v, suffix, def, &x);
        if (rc < 0) return -1;
        for (int i = 0; i < D * D; i++)
            out[i] = x;
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) != (size_t)D)
        return fielderr_fail(e, suffix, "must be a number or a %dx%d matrix (one row per device)", D, D);
    for (int r = 0; r < D; r++) {
        const json_t *row = json_array_get(v, (size_t)r);
        snprintf(suffix, sizeof suffix, ".comm.%s[%d]", key, r);
        if (!json_is_array(row) || json_array_size(row) != (size_t)D)
            return fielderr_fail(e, suffix, "must be an array of %d numbers (one per device)", D);
        for (int c = 0; c < D; c++) {
            snprintf(suffix, sizeof suffix, ".comm.%s[%d][%d]", key, r, c);
            const json_t *cell = json_array_get(row, (size_t)c);
            int rc = positive ? read_positive(e, cell, suffix, def, &x) : read_nonneg(e, cell, suffix, def, &x);
            if (rc < 0) return -1;
            out[r * D + c] = x;
        }
    }
    return 0;
}

static int parse_comm(fielderr *e, place_graph *g, const json_t *graph)
{
    int D = g->n_devices;
    g->latency_us = xmalloc((size_t)D * D * sizeof(double));
    g->bytes_per_us = xmalloc((size_t)D * D * sizeof(double));
    const json_t *c = json_object_get(graph, "comm");
    if (c && !json_is_null(c) && !json_is_object(c)) return fielderr_fail(e, ".comm", "must be an object");
    const json_t *lat = c ? json_object_get(c, "latency_us") : NULL;
    const json_t *bw = c ? json_object_get(c, "bytes_per_us") : NULL;
    if (parse_link_value(e, lat, "latency_us", PLACE_DEFAULT_LATENCY_US, 0, D, g->latency_us) < 0) return -1;
    return parse_link_value(e, bw, "bytes_per_us", PLACE_DEFAULT_BYTES_PER_US, 1, D, g->bytes_per_us);
}

/* ---- adjacency and order ---- */

/* CSR: off has n+1 entries; idx lists edge ids grouped by key, in input order. */
static void build_csr(const place_graph *g, int by_dst, int **off_out, int **idx_out)
{
    int n = g->n_ops, m = g->n_edges;
    int *off = xcalloc((size_t)n + 1, sizeof *off);
    int *idx = xmalloc((size_t)(m ? m : 1) * sizeof *idx);
    int *fill = xcalloc((size_t)n + 1, sizeof *fill);
    for (int i = 0; i < m; i++)
        off[(by_dst ? g->edges[i].dst : g->edges[i].src) + 1]++;
    for (int i = 0; i < n; i++)
        off[i + 1] += off[i];
    for (int i = 0; i < m; i++) {
        int k = by_dst ? g->edges[i].dst : g->edges[i].src;
        idx[off[k] + fill[k]++] = i;
    }
    free(fill);
    *off_out = off;
    *idx_out = idx;
}

static void heap_push(int *h, int *n, int v)
{
    int i = (*n)++;
    while (i > 0 && h[(i - 1) / 2] > v) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = v;
}

static int heap_pop(int *h, int *n)
{
    int top = h[0], v = h[--(*n)], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
    return top;
}

/* An op left over by Kahn's algorithm has an unplaced predecessor; walking
 * predecessors from it must revisit some op, and that op lies on a cycle. */
static int find_cycle_op(const place_graph *g, const int *indeg)
{
    int n = g->n_ops, cur = -1;
    for (int i = 0; i < n && cur < 0; i++)
        if (indeg[i] > 0) cur = i;
    char *seen = xcalloc((size_t)n, 1);
    while (!seen[cur]) {
        seen[cur] = 1;
        for (int k = g->in_off[cur]; k < g->in_off[cur + 1]; k++) {
            int p = g->edges[g->in_edge[k]].src;
            if (indeg[p] > 0) {
                cur = p;
                break;
            }
        }
    }
    free(seen);
    return cur;
}

static int topo_sort(fielderr *e, place_graph *g)
{
    int n = g->n_ops, hn = 0, done = 0;
    int *indeg = xcalloc((size_t)n, sizeof *indeg), *heap = xmalloc((size_t)n * sizeof *heap);
    g->topo = xmalloc((size_t)n * sizeof *g->topo);
    g->topo_pos = xmalloc((size_t)n * sizeof *g->topo_pos);
    for (int i = 0; i < n; i++)
        indeg[i] = g->in_off[i + 1] - g->in_off[i];
    for (int i = 0; i < n; i++)
        if (indeg[i] == 0) heap_push(heap, &hn, i);
    while (hn > 0) {
        int u = heap_pop(heap, &hn);
        g->topo_pos[u] = done;
        g->topo[done++] = u;
        for (int k = g->out_off[u]; k < g->out_off[u + 1]; k++) {
            int v = g->edges[g->out_edge[k]].dst;
            if (--indeg[v] == 0) heap_push(heap, &hn, v);
        }
    }
    int rc = 0;
    if (done < n) rc = fielderr_fail(e, ".edges", "graph has a cycle through op '%s'", g->ops[find_cycle_op(g, indeg)].name);
    free(indeg);
    free(heap);
    return rc;
}

static int build_order(fielderr *e, place_graph *g)
{
    build_csr(g, 0, &g->out_off, &g->out_edge);
    build_csr(g, 1, &g->in_off, &g->in_edge);
    return topo_sort(e, g);
}

/* ---- public ---- */

int place_graph_index(place_graph *g, char *msg, size_t msg_len)
{
    char field[8];
    fielderr e = {"", field, sizeof field, msg, msg_len};
    free(g->out_off), free(g->out_edge), free(g->in_off), free(g->in_edge), free(g->topo), free(g->topo_pos);
    g->out_off = g->out_edge = g->in_off = g->in_edge = g->topo = g->topo_pos = NULL;
    return build_order(&e, g);
}

void place_graph_copy_devices(place_graph *dst, const place_graph *src)
{
    size_t D = (size_t)src->n_devices;
    dst->devices = xcalloc(D, sizeof *dst->devices);
    dst->latency_us = xmalloc(D * D * sizeof(double));
    dst->bytes_per_us = xmalloc(D * D * sizeof(double));
    for (size_t d = 0; d < D; d++) {
        dst->devices[d] = src->devices[d];
        dst->devices[d].name = xstrdup(src->devices[d].name);
        dst->n_devices = (int)d + 1;
    }
    memcpy(dst->latency_us, src->latency_us, D * D * sizeof(double));
    memcpy(dst->bytes_per_us, src->bytes_per_us, D * D * sizeof(double));
}

place_graph *place_graph_parse(const json_t *json, const char *prefix, char *field, size_t field_len, char *msg, size_t msg_len)
{
    fielderr e = {prefix ? prefix : "", field, field_len, msg, msg_len};
    if (!json_is_object(json)) return fielderr_set(&e, "", "must be an object"), NULL;
    place_graph *g = xcalloc(1, sizeof *g);
    strmap names = {0};
    int rc = parse_ops(&e, g, &names, json);
    if (rc == 0) rc = parse_edges(&e, g, &names, json);
    strmap_free(&names);
    if (rc == 0) rc = parse_devices(&e, g, json);
    if (rc == 0) rc = parse_comm(&e, g, json);
    if (rc == 0) rc = build_order(&e, g);
    if (rc == 0) return g;
    place_graph_free(g);
    return NULL;
}

void place_graph_free(place_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_ops; i++)
        free(g->ops[i].name);
    for (int i = 0; i < g->n_groups; i++)
        free(g->group_names[i]);
    for (int i = 0; i < g->n_devices; i++)
        free(g->devices[i].name);
    free(g->ops);
    free(g->group_names);
    free(g->edges);
    free(g->devices);
    free(g->latency_us);
    free(g->bytes_per_us);
    free(g->out_off);
    free(g->out_edge);
    free(g->in_off);
    free(g->in_edge);
    free(g->topo);
    free(g->topo_pos);
    free(g);
}

double place_op_time(const place_graph *g, int op, int dev)
{
    return g->ops[op].compute_us / g->devices[dev].speed;
}

double place_comm_time(const place_graph *g, int from, int to, int64_t bytes)
{
    if (from == to) return 0;
    int k = from * g->n_devices + to;
    return g->latency_us[k] + (double)bytes / g->bytes_per_us[k];
}

int64_t place_op_memory(const place_graph *g, int op)
{
    const place_op *o = &g->ops[op];
    return o->persistent_bytes + o->output_bytes + o->temp_bytes;
}
