/* amp_problem.c - the strategy search's input (amp_problem.h) from JSON.
 *
 * Input (spec.strategy, or the file given to gantry-place --strategy):
 *   {"layers": [{"name", "forward_ms", "params", "activation_bytes", "stash_bytes"}],
 *    "cluster": {"nodes", "gpus_per_node",
 *                "intra_bw_gbps", "inter_bw_gbps" or "bandwidth_gbps": [[nodes x nodes]],
 *                "gpu_speed": [one per GPU] or one number,
 *                "gpu_memory_bytes": [one per GPU] or one number},
 *    "global_batch": 512, "top_k": 10, "bytes_per_param": 2,
 *    "state_bytes_per_param": 16, "partition": "balanced" | "uniform"}
 * Errors name the JSON path of the bad field, like graph errors do. */
#include "spec/amp_problem.h"

#include "common/alloc.h"
#include "common/fielderr.h"
#include "common/schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the strategy's numbers, read through their shapes (common/schema.h); jansson holds no NaN or
 * infinity, so a number is finite */
static const sch nonneg_s = {SCH_NUM, SCH_MIN(0), .msg = "must be a non-negative number"};
static const sch positive_s = {SCH_NUM, SCH_ABOVE(0), .msg = "must be a positive number"};
_Static_assert(AMP_MAX_GPUS == 4096 && AMP_MAX_BATCH == 16777216, "the messages below name the limits");
static const sch gpus_s = {SCH_INT, SCH_IN(1, AMP_MAX_GPUS), .msg = "must be an integer from 1 to 4096"};
static const sch batch_s = {SCH_INT, SCH_IN(1, AMP_MAX_BATCH), .msg = "must be an integer from 1 to 16777216"};
static const sch top_k_s = {SCH_INT, SCH_IN(1, 100), .msg = "must be an integer from 1 to 100"};

/* obj[key] (at where under the prefix) through its shape; def < 0: required */
static int read_num(const fielderr *e, const json_t *obj, const char *key, const char *where, double def, const sch *s, double *out)
{
    char suffix[96], path[256];
    snprintf(suffix, sizeof suffix, "%s.%s", where, key);
    fielderr_path(e, suffix, path, sizeof path);
    return sch_read_number(s, json_object_get(obj, key), def < 0 ? NAN : def, path, out, e->field, e->field_len, e->msg,
                           e->msg_len);
}

static int read_int(const fielderr *e, const json_t *obj, const char *key, const char *where, int def, const sch *s, int *out)
{
    double d;
    if (read_num(e, obj, key, where, def, s, &d) < 0) return -1;
    *out = (int)d;
    return 0;
}

static int parse_layer(fielderr *e, amp_problem *p, const json_t *o, int i)
{
    char where[48], suffix[64];
    snprintf(where, sizeof where, ".layers[%d]", i);
    if (!json_is_object(o)) return fielderr_fail(e, where, "must be an object");
    amp_layer *l = &p->layers[i];
    const json_t *name = json_object_get(o, "name");
    snprintf(suffix, sizeof suffix, "%s.name", where);
    if (!json_is_string(name) || json_string_length(name) == 0 || json_string_length(name) > 255)
        return fielderr_fail(e, suffix, "must be a non-empty string shorter than 256 bytes");
    l->name = xstrdup(json_string_value(name));
    p->n_layers = i + 1;
    if (read_num(e, o, "forward_ms", where, -1, &nonneg_s, &l->forward_ms) < 0) return -1;
    if (read_num(e, o, "params", where, 0, &nonneg_s, &l->params) < 0) return -1;
    if (read_num(e, o, "activation_bytes", where, 0, &nonneg_s, &l->activation_bytes) < 0) return -1;
    return read_num(e, o, "stash_bytes", where, l->activation_bytes, &nonneg_s, &l->stash_bytes);
}

static int parse_layers(fielderr *e, amp_problem *p, const json_t *j)
{
    const json_t *a = json_object_get(j, "layers");
    if (!a) return fielderr_fail(e, ".layers", "is required");
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > AMP_MAX_LAYERS)
        return fielderr_fail(e, ".layers", "must be an array of 1 to %d layers", AMP_MAX_LAYERS);
    p->layers = xcalloc(json_array_size(a), sizeof *p->layers);
    for (size_t i = 0; i < json_array_size(a); i++)
        if (parse_layer(e, p, json_array_get(a, i), (int)i) < 0) return -1;
    return 0;
}

/* cluster[key]: one positive number for every GPU, or one per GPU in rank
 * order, into a new array (def when absent) */
static int per_gpu(fielderr *e, amp_problem *p, const json_t *c, const char *key, double def, double **out)
{
    int G = p->nodes * p->gpus_per_node;
    char field[64];
    snprintf(field, sizeof field, ".cluster.%s", key);
    const json_t *v = json_object_get(c, key);
    *out = xmalloc((size_t)G * sizeof **out);
    if (!v || json_is_number(v)) {
        double s;
        if (read_num(e, c, key, ".cluster", def, &positive_s, &s) < 0) return -1;
        for (int r = 0; r < G; r++)
            (*out)[r] = s;
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) != (size_t)G)
        return fielderr_fail(e, field, "must be a positive number or an array of %d (nodes x gpus_per_node) numbers", G);
    for (int r = 0; r < G; r++) {
        double s = json_is_number(json_array_get(v, (size_t)r)) ? json_number_value(json_array_get(v, (size_t)r)) : -1;
        if (!isfinite(s) || s <= 0) return fielderr_fail(e, field, "entry %d must be a positive number", r);
        (*out)[r] = s;
    }
    return 0;
}

/* cluster.bandwidth_gbps: nodes rows of nodes positive numbers */
static int parse_matrix(fielderr *e, amp_problem *p, const json_t *m)
{
    int n = p->nodes;
    if (n > AMP_MAX_MATRIX_NODES)
        return fielderr_fail(e, ".cluster.bandwidth_gbps", "describes at most %d nodes", AMP_MAX_MATRIX_NODES);
    if (!json_is_array(m) || json_array_size(m) != (size_t)n)
        return fielderr_fail(e, ".cluster.bandwidth_gbps", "must be an array of %d rows (one per node) of %d numbers", n, n);
    p->link_gbps = xmalloc((size_t)n * n * sizeof *p->link_gbps);
    for (int a = 0; a < n; a++) {
        char field[64];
        snprintf(field, sizeof field, ".cluster.bandwidth_gbps[%d]", a);
        const json_t *row = json_array_get(m, (size_t)a);
        if (!json_is_array(row) || json_array_size(row) != (size_t)n)
            return fielderr_fail(e, field, "must be an array of %d numbers", n);
        for (int b = 0; b < n; b++) {
            const json_t *x = json_array_get(row, (size_t)b);
            double v = json_is_number(x) ? json_number_value(x) : -1;
            if (!isfinite(v) || v <= 0) return fielderr_fail(e, field, "entry %d must be a positive number (Gbit/s)", b);
            p->link_gbps[(size_t)a * n + b] = v;
        }
    }
    return 0;
}

static int parse_links(fielderr *e, amp_problem *p, const json_t *c)
{
    const json_t *m = json_object_get(c, "bandwidth_gbps");
    if (m && !json_is_null(m)) {
        if (json_object_get(c, "intra_bw_gbps") || json_object_get(c, "inter_bw_gbps"))
            return fielderr_fail(e, ".cluster.bandwidth_gbps",
                                 "give either bandwidth_gbps or intra_bw_gbps/inter_bw_gbps, not both");
        return parse_matrix(e, p, m);
    }
    if (read_num(e, c, "intra_bw_gbps", ".cluster", -1, &positive_s, &p->intra_gbps) < 0) return -1;
    return read_num(e, c, "inter_bw_gbps", ".cluster", p->nodes > 1 ? -1 : p->intra_gbps, &positive_s, &p->inter_gbps);
}

static int parse_cluster(fielderr *e, amp_problem *p, const json_t *j)
{
    const json_t *c = json_object_get(j, "cluster");
    if (!c) return fielderr_fail(e, ".cluster", "is required");
    if (!json_is_object(c)) return fielderr_fail(e, ".cluster", "must be an object");
    if (read_int(e, c, "nodes", ".cluster", -1, &gpus_s, &p->nodes) < 0) return -1;
    if (read_int(e, c, "gpus_per_node", ".cluster", -1, &gpus_s, &p->gpus_per_node) < 0) return -1;
    if (p->nodes * p->gpus_per_node > AMP_MAX_GPUS) return fielderr_fail(e, ".cluster", "at most %d GPUs in all", AMP_MAX_GPUS);
    if (parse_links(e, p, c) < 0) return -1;
    if (per_gpu(e, p, c, "gpu_speed", 1.0, &p->gpu_speed) < 0) return -1;
    const json_t *mem = json_object_get(c, "gpu_memory_bytes");
    if (!mem || json_is_null(mem)) return 0;
    return per_gpu(e, p, c, "gpu_memory_bytes", -1, &p->gpu_memory);
}

static int parse_partition(fielderr *e, amp_problem *p, const json_t *j)
{
    const json_t *v = json_object_get(j, "partition");
    p->partition = AMP_PARTITION_BALANCED;
    if (!v || json_is_null(v)) return 0;
    const char *s = json_string_value(v);
    if (s && !strcmp(s, "uniform"))
        p->partition = AMP_PARTITION_UNIFORM;
    else if (!s || strcmp(s, "balanced"))
        return fielderr_fail(e, ".partition", "must be \"balanced\" (searched stage cuts) or \"uniform\" (equal layer counts)");
    return 0;
}

amp_problem *amp_problem_parse(const json_t *j, const char *prefix, char *field, size_t field_len, char *msg, size_t msg_len)
{
    fielderr e = {prefix ? prefix : "", field, field_len, msg, msg_len};
    if (!json_is_object(j)) return fielderr_set(&e, "", "must be an object"), NULL;
    amp_problem *p = xcalloc(1, sizeof *p);
    int rc = parse_layers(&e, p, j);
    if (rc == 0) rc = parse_cluster(&e, p, j);
    if (rc == 0) rc = read_int(&e, j, "global_batch", "", -1, &batch_s, &p->global_batch);
    if (rc == 0) rc = read_int(&e, j, "top_k", "", AMP_DEFAULT_TOP_K, &top_k_s, &p->top_k);
    if (rc == 0) rc = read_num(&e, j, "bytes_per_param", "", AMP_DEFAULT_BYTES_PER_PARAM, &positive_s, &p->bytes_per_param);
    if (rc == 0)
        rc = read_num(&e, j, "state_bytes_per_param", "", AMP_DEFAULT_STATE_BYTES_PER_PARAM, &nonneg_s, &p->state_bytes_per_param);
    if (rc == 0) rc = parse_partition(&e, p, j);
    if (rc == 0) return p;
    amp_problem_free(p);
    return NULL;
}

void amp_problem_free(amp_problem *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_layers; i++)
        free(p->layers[i].name);
    free(p->layers);
    free(p->gpu_speed);
    free(p->gpu_memory);
    free(p->link_gbps);
    free(p);
}
