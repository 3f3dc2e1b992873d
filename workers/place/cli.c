/* cli.c - gantry-place: place a graph file offline and print the result.
 *
 * A thin shell of I/O around place.h: read the file, apply the command-line
 * overrides to the JSON, validate, solve, print.  The file may be a graph, a
 * placement spec ({"graph": ...}) or a whole job file ({"type": "placement",
 * "spec": {...}}), so deploy/examples/placement.json works as is; errors name
 * fields relative to the file. */
#include "workers/place/graph.h"
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
} options;

static void usage(FILE *f)
{
    fprintf(f, "usage: gantry-place GRAPH.json [--algo NAME|all]... [--devices N --memory BYTES]\n"
               "\n"
               "Splits an operator graph over memory-limited devices, simulates every\n"
               "candidate plan and prints the result (best plan, candidates) as JSON.\n"
               "GRAPH.json is a graph, a placement spec {\"graph\":...} or a job file.\n"
               "\n"
               "  --algo NAME     algorithm to run (repeat or comma-separate); 'all' runs\n"
               "                  every one; default: the file's spec, else m-topo.\n"
               "                  The single-device plan is always weighed when it fits.\n"
               "  --devices N     replace the file's devices with N identical devices\n"
               "                  (gpu0..gpuN-1, speed 1.0); needs --memory\n"
               "  --memory BYTES  memory of every device\n"
               "  -h, --help      this text\n"
               "\n"
               "algorithms:");
    for (int i = 0; place_algorithm_name(i); i++)
        fprintf(f, " %s", place_algorithm_name(i));
    fprintf(f, " all\nexit status: 0 placed, 1 invalid graph or no feasible plan, 2 usage\n");
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "gantry-place: %s%s%s\n", what, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "try 'gantry-place --help'\n");
    return 2;
}

static int add_algos(options *o, const char *list)
{
    char *copy = strdup(list), *save = NULL;
    if (!copy) return -1;
    if (!o->algorithms) o->algorithms = json_array();
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        json_array_append_new(o->algorithms, json_string(tok));
    free(copy);
    return 0;
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

/* Returns -1 to continue, else the exit code. */
static int parse_args(int argc, char **argv, options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        int has_value = !strcmp(a, "--algo") || !strcmp(a, "--devices") || !strcmp(a, "--memory");
        if (has_value && i + 1 >= argc) return usage_error("missing value for", a);
        if (!strcmp(a, "--algo")) {
            if (add_algos(o, argv[++i]) < 0) return usage_error("out of memory", NULL);
        } else if (!strcmp(a, "--devices")) {
            if (parse_count(argv[++i], &o->devices) < 0) return usage_error("--devices needs a count from 1 to 1024", argv[i]);
        } else if (!strcmp(a, "--memory")) {
            if (parse_bytes(argv[++i], &o->memory) < 0) return usage_error("--memory needs a positive number of bytes", argv[i]);
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option", a);
        } else if (o->path) {
            return usage_error("more than one graph file", a);
        } else {
            o->path = a;
        }
    }
    if (!o->path) return usage_error("no graph file given", NULL);
    if (o->devices && !o->memory) return usage_error("--devices needs --memory", NULL);
    return -1;
}

/* Wraps the loaded file into a spec (new reference) and says what it was. */
static json_t *as_spec(json_t *root, int *kind)
{
    json_t *spec = json_object_get(root, "spec");
    if (json_is_object(spec)) {
        *kind = FILE_JOB;
        return json_incref(spec);
    }
    if (json_is_object(json_object_get(root, "graph"))) {
        *kind = FILE_SPEC;
        return json_incref(root);
    }
    *kind = FILE_GRAPH;
    spec = json_object();
    json_object_set(spec, "graph", root);
    return spec;
}

/* A field path as the user sees it in their file. */
static const char *file_field(const char *field, int kind)
{
    if (kind == FILE_JOB) return field;
    if (strncmp(field, "spec.", 5) == 0) field += 5;
    if (kind == FILE_SPEC) return field;
    if (strcmp(field, "graph") == 0) return "(top level)";
    return strncmp(field, "graph.", 6) == 0 ? field + 6 : field;
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

static int run(const options *o)
{
    json_error_t jerr;
    json_t *root = json_load_file(o->path, 0, &jerr);
    if (!root) {
        if (jerr.line > 0)
            fprintf(stderr, "gantry-place: %s:%d:%d: %s\n", o->path, jerr.line, jerr.column, jerr.text);
        else
            fprintf(stderr, "gantry-place: %s\n", jerr.text);
        return 1;
    }
    int kind;
    json_t *spec = as_spec(root, &kind);
    json_decref(root);
    if (o->algorithms) json_object_set(spec, "algorithms", o->algorithms);
    override_devices(spec, o);
    char field[160], msg[320], err[512];
    int rc = 1;
    json_t *result = NULL;
    if (place_spec_validate(spec, field, sizeof field, msg, sizeof msg) < 0) {
        int from_flag = o->algorithms && strncmp(field, "spec.algorithms", 15) == 0;
        fprintf(stderr, "gantry-place: %s: %s: %s\n", from_flag ? "--algo" : o->path,
                from_flag ? field + 5 : file_field(field, kind), msg);
    } else if (!(result = place_solve(spec, err, sizeof err)))
        fprintf(stderr, "gantry-place: %s: %s\n", o->path, err);
    else if (json_dumpf(result, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(15)) == 0 && fputc('\n', stdout) != EOF)
        rc = 0;
    else
        fprintf(stderr, "gantry-place: cannot write the result: %s\n", strerror(errno));
    json_decref(result);
    json_decref(spec);
    return rc;
}

int main(int argc, char **argv)
{
    options o = {0};
    int rc = parse_args(argc, argv, &o);
    if (rc < 0) rc = run(&o);
    json_decref(o.algorithms);
    return rc;
}
