/* place_main.c - gantry-place: place a graph file offline, or search parallel
 * strategies, and print the result.
 *
 * A thin shell of I/O around place.h: read the file (or stdin), apply the
 * command-line overrides to the JSON, validate, solve, print.  The file may
 * be a graph, a placement spec ({"graph": ...}) or a whole job file
 * ({"type": "placement", "spec": {...}}), so deploy/examples/placement.json
 * works as is; errors name fields relative to the file.  --strategy reads a
 * strategy search ({"layers", "cluster", "global_batch"}, or a spec or job
 * holding one).  --summary prints a table instead of the JSON. */
#include "spec/place_graph.h"

#include "common/alloc.h"
#include "workers/place/place.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FILE_GRAPH, FILE_SPEC, FILE_JOB };

typedef struct options {
    const char *path;
    json_t *algorithms; /* NULL: the file's choice, else an array of names */
    long devices;       /* 0: keep the file's devices */
    int64_t memory;     /* 0: keep the file's capacities */
    int fuse, coplace, plain, summary, strategy;
} options;

static void usage(FILE *f)
{
    fprintf(f, "usage: gantry-place GRAPH.json|- [--algo NAME|all]... [--fuse] [--coplace] [--plain] [--summary]\n"
               "                    [--devices N --memory BYTES]\n"
               "       gantry-place --strategy FILE.json|- [--summary]\n"
               "\n"
               "Splits an operator graph over memory-limited devices, simulates every\n"
               "candidate plan and prints the result (best plan, candidates, schedule)\n"
               "as JSON.  GRAPH.json is a graph, a placement spec {\"graph\":...} or a job\n"
               "file; '-' reads standard input.\n"
               "\n"
               "  --algo NAME     algorithm to run (repeat or comma-separate); 'all' runs\n"
               "                  every one; default: the file's spec, else m-topo.\n"
               "                  m-TOPO and the single-device plan are always weighed.\n"
               "  --fuse          fuse ops inside colocation groups (spec \"fuse\")\n"
               "  --coplace       grow groups along single consumers (spec \"coplace\")\n"
               "  --plain         neither (spec \"fuse\": false, \"coplace\": false)\n"
               "                  Without any of these three the solver weighs the graph\n"
               "                  with both, with each and with neither, and keeps the\n"
               "                  best plan; with them, only the variant they name.\n"
               "  --summary       one line per algorithm instead of JSON: placement time,\n"
               "                  makespan, x lower bound, peak memory per device\n"
               "  --devices N     replace the file's devices with N identical devices\n"
               "                  (gpu0..gpuN-1, speed 1.0); needs --memory\n"
               "  --memory BYTES  memory of every device\n"
               "  --strategy FILE AMP-style search of data/tensor/pipeline parallelism for a\n"
               "                  layer list and a cluster (docs/placement.md)\n"
               "  -h, --help      this text\n"
               "\n"
               "algorithms:");
    for (int i = 0; place_algorithm_name(i); i++)
        fprintf(f, " %s", place_algorithm_name(i));
    fprintf(f, " all\nexit status: 0 placed, 1 invalid input or no feasible plan, 2 usage\n");
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "gantry-place: %s%s%s\n", what, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "try 'gantry-place --help'\n");
    return 2;
}

static void add_algos(options *o, const char *list)
{
    char *copy = xstrdup(list), *save = NULL;
    if (!o->algorithms) o->algorithms = json_array();
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        json_array_append_new(o->algorithms, json_string(tok));
    free(copy);
}

static int parse_count(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > PLACE_MAX_DEVICES) return -1;
    *out = v;
    return 0;
}

static int parse_bytes(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 1) || v > (double)PLACE_MAX_DEVICE_BYTES || v != floor(v)) return -1;
    *out = (int64_t)v;
    return 0;
}

static int flag(const char *a, options *o)
{
    if (!strcmp(a, "--fuse")) return o->fuse = 1;
    if (!strcmp(a, "--coplace")) return o->coplace = 1;
    if (!strcmp(a, "--plain")) return o->plain = 1;
    if (!strcmp(a, "--summary")) return o->summary = 1;
    return 0;
}

static int set_path(options *o, const char *a)
{
    if (o->path) return usage_error("more than one input file", a);
    o->path = a;
    return -1;
}

/* Returns -1 to continue, else the exit code. */
static int parse_args(int argc, char **argv, options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = -1;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        int has_value = !strcmp(a, "--algo") || !strcmp(a, "--devices") || !strcmp(a, "--memory") || !strcmp(a, "--strategy");
        if (has_value && i + 1 >= argc) return usage_error("missing value for", a);
        if (flag(a, o)) continue;
        if (!strcmp(a, "--algo")) {
            add_algos(o, argv[++i]);
        } else if (!strcmp(a, "--devices")) {
            if (parse_count(argv[++i], &o->devices) < 0) return usage_error("--devices needs a count from 1 to 1024", argv[i]);
        } else if (!strcmp(a, "--memory")) {
            if (parse_bytes(argv[++i], &o->memory) < 0) return usage_error("--memory needs a positive number of bytes", argv[i]);
        } else if (!strcmp(a, "--strategy")) {
            o->strategy = 1;
            rc = set_path(o, argv[++i]);
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option", a);
        } else {
            rc = set_path(o, a);
        }
        if (rc >= 0) return rc;
    }
    if (!o->path) return usage_error("no input file given", NULL);
    if (o->devices && !o->memory) return usage_error("--devices needs --memory", NULL);
    if (o->plain && (o->fuse || o->coplace)) return usage_error("--plain excludes --fuse and --coplace", NULL);
    if (o->strategy && (o->algorithms || o->devices || o->memory || o->fuse || o->coplace || o->plain))
        return usage_error("--strategy takes no placement options", NULL);
    return -1;
}

/* Wraps the loaded file into a spec (new reference) and says what it was. */
static json_t *as_spec(json_t *root, const char *key, int *kind)
{
    json_t *spec = json_object_get(root, "spec");
    if (json_is_object(spec)) {
        *kind = FILE_JOB;
        return json_incref(spec);
    }
    if (json_is_object(json_object_get(root, key))) {
        *kind = FILE_SPEC;
        return json_incref(root);
    }
    *kind = FILE_GRAPH;
    spec = json_object();
    json_object_set(spec, key, root);
    return spec;
}

/* A field path as the user sees it in their file. */
static const char *file_field(const char *field, const char *key, int kind)
{
    size_t n = strlen(key);
    if (kind == FILE_JOB) return field;
    if (strncmp(field, "spec.", 5) == 0) field += 5;
    if (kind == FILE_SPEC) return field;
    if (strcmp(field, key) == 0) return "(top level)";
    return strncmp(field, key, n) == 0 && field[n] == '.' ? field + n + 1 : field;
}

static void override_devices(json_t *spec, const options *o)
{
    json_t *graph = json_object_get(spec, "graph");
    if (!json_is_object(graph)) return;
    if (o->devices) {
        json_t *devs = json_array();
        for (long i = 0; i < o->devices; i++) {
            char name[32];
            snprintf(name, sizeof name, "gpu%ld", i);
            json_array_append_new(devs,
                                  json_pack("{s:s, s:I, s:f}", "name", name, "memory_bytes", (json_int_t)o->memory, "speed", 1.0));
        }
        json_object_set_new(graph, "devices", devs);
        return;
    }
    json_t *devs = json_object_get(graph, "devices"), *d;
    size_t i;
    if (o->memory && json_is_array(devs)) json_array_foreach(devs, i, d)
        {
            if (json_is_object(d)) json_object_set_new(d, "memory_bytes", json_integer((json_int_t)o->memory));
        }
}

static void apply_options(json_t *spec, const options *o)
{
    if (o->strategy) return;
    if (o->algorithms) json_object_set(spec, "algorithms", o->algorithms);
    if (o->fuse || o->coplace || o->plain) { /* the flags name the whole variant */
        json_object_set_new(spec, "fuse", json_boolean(o->fuse));
        json_object_set_new(spec, "coplace", json_boolean(o->coplace));
    }
    override_devices(spec, o);
}

static json_t *load(const options *o)
{
    json_error_t jerr;
    int stdin_input = strcmp(o->path, "-") == 0;
    json_t *root = stdin_input ? json_loadf(stdin, 0, &jerr) : json_load_file(o->path, 0, &jerr);
    if (root) return root;
    if (jerr.line > 0)
        fprintf(stderr, "gantry-place: %s:%d:%d: %s\n", stdin_input ? "<stdin>" : o->path, jerr.line, jerr.column, jerr.text);
    else
        fprintf(stderr, "gantry-place: %s\n", jerr.text);
    return NULL;
}

/* ---- --summary ---- */

static void human_bytes(int64_t b, char *buf, size_t len)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4)
        v /= 1024, u++;
    snprintf(buf, len, u ? "%.1f%s" : "%.0f%s", v, unit[u]);
}

static void summary_placement(const json_t *r)
{
    printf("%-8s %-12s %-9s %12s %13s %8s  %s\n", "algo", "variant", "feasible", "placement_ms", "makespan_ms", "x_bound",
           "peak memory per device");
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(r, "candidates"), i, c)
    {
        const json_t *peaks = json_object_get(c, "peak_bytes");
        printf("%-8s %-12s %-9s %12.3f ", json_string_value(json_object_get(c, "algorithm")),
               json_string_value(json_object_get(c, "variant")), json_is_true(json_object_get(c, "feasible")) ? "yes" : "no",
               json_number_value(json_object_get(c, "placement_ms")));
        if (!peaks) {
            printf("%13s %8s  %s\n", "-", "-", json_string_value(json_object_get(c, "reason")));
            continue;
        }
        printf("%13.3f %8.3f ", json_number_value(json_object_get(c, "makespan_us")) / 1000.0,
               json_number_value(json_object_get(c, "makespan_over_lower_bound")));
        size_t d;
        const json_t *p;
        json_array_foreach(peaks, d, p)
        {
            char b[32];
            human_bytes(json_integer_value(p), b, sizeof b);
            printf(" %s", b);
        }
        printf("\n");
    }
    const json_t *m = json_object_get(r, "metrics");
    printf("best: %s on %s, makespan %.3f ms, lower bound %.3f ms; %d variant%s weighed in %.3f ms\n",
           json_string_value(json_object_get(r, "best")), json_string_value(json_object_get(r, "variant")),
           json_number_value(json_object_get(m, "makespan_us")) / 1000.0,
           json_number_value(json_object_get(r, "lower_bound_us")) / 1000.0,
           (int)json_integer_value(json_object_get(m, "variants_weighed")),
           json_integer_value(json_object_get(m, "variants_weighed")) == 1 ? "" : "s",
           json_number_value(json_object_get(m, "search_ms")));
}

static void summary_strategy(const json_t *r)
{
    printf("%-24s %5s %5s %5s %5s %6s %13s %13s %13s  %s\n", "strategy", "mp", "dp", "pp", "mbs", "micro", "iteration_ms",
           "pipeline_ms", "allreduce_ms", "cuts");
    size_t i;
    const json_t *s;
    json_array_foreach(json_object_get(r, "strategies"), i, s)
    {
        printf("%-24s %5d %5d %5d %5d %6d %13.3f %13.3f %13.3f ", json_string_value(json_object_get(s, "name")),
               (int)json_integer_value(json_object_get(s, "mp")), (int)json_integer_value(json_object_get(s, "dp")),
               (int)json_integer_value(json_object_get(s, "pp")), (int)json_integer_value(json_object_get(s, "micro_batch_size")),
               (int)json_integer_value(json_object_get(s, "micro_batches")), json_number_value(json_object_get(s, "iteration_ms")),
               json_number_value(json_object_get(s, "pipeline_ms")), json_number_value(json_object_get(s, "allreduce_ms")));
        size_t k;
        const json_t *c;
        json_array_foreach(json_object_get(s, "cuts"), k, c) printf(" %d", (int)json_integer_value(c));
        printf("\n");
    }
    const json_t *m = json_object_get(r, "metrics");
    printf("searched %d strategies in %.3f ms\n", (int)json_integer_value(json_object_get(m, "evaluated")),
           json_number_value(json_object_get(m, "search_ms")));
}

static int print_result(const json_t *r, const options *o)
{
    if (o->summary) {
        if (o->strategy)
            summary_strategy(r);
        else
            summary_placement(r);
        return fflush(stdout) == 0 ? 0 : -1;
    }
    if (json_dumpf(r, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(15)) != 0 || fputc('\n', stdout) == EOF) return -1;
    return fflush(stdout) == 0 ? 0 : -1;
}

static int run(const options *o)
{
    json_t *root = load(o);
    if (!root) return 1;
    const char *key = o->strategy ? "strategy" : "graph", *name = strcmp(o->path, "-") ? o->path : "<stdin>";
    int kind;
    json_t *spec = as_spec(root, key, &kind);
    json_decref(root);
    apply_options(spec, o);
    char field[160], msg[320], err[512];
    int rc = 1;
    json_t *result = NULL;
    if (place_spec_validate(spec, field, sizeof field, msg, sizeof msg) < 0) {
        int from_flag = o->algorithms && strncmp(field, "spec.algorithms", 15) == 0;
        fprintf(stderr, "gantry-place: %s: %s: %s\n", from_flag ? "--algo" : name,
                from_flag ? field + 5 : file_field(field, key, kind), msg);
    } else if (!(result = place_solve(spec, err, sizeof err)))
        fprintf(stderr, "gantry-place: %s: %s\n", name, err);
    else if (print_result(result, o) == 0)
        rc = 0;
    else
        fprintf(stderr, "gantry-place: cannot write the result: %s\n", strerror(errno));
    json_decref(result);
    json_decref(spec);
    return rc;
}

int main(int argc, char **argv)
{
    json_set_alloc_funcs(xmalloc, free); /* jansson never returns NULL for memory (common/alloc.h) */
    options o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc < 0) rc = run(&o);
    json_decref(o.algorithms);
    return rc;
}
