/* fuzz_place.c - the placement job end to end through workers/place/place.h: the spec the
 * server validates (place_spec_validate) and, when it is valid and small, what the worker runs
 * (place_solve: graph parsing, every algorithm, the simulator, the result JSON).
 *
 * The input is a placement spec {"graph": ..., "algorithms": [...]}; a bare graph (an object
 * with "ops" and no "graph") is wrapped as {"graph": it, "algorithms": ["all"]}, so graph
 * files serve as seeds too.  It is parsed like the worker's task (jansson, duplicates allowed).
 *
 * Checks: validation and the solver agree (the server must not accept what the worker refuses
 * as invalid); errors fit in a JSON string (they become an event's reason); a result has the
 * shape docs/placement.md gives, places every op on a device of the graph, and its figures are
 * finite numbers. */
#include "workers/place/place.h"
#include "tests/fuzz/fuzz.h"

#include <math.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* place_solve only for graphs below this many ops: bigger ones are slow and add no new paths */
#define SOLVE_MAX_OPS 200

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    json_object_seed(1);
    return 0;
}

static int is_device(const json_t *graph, const char *name)
{
    size_t i;
    const json_t *d;
    json_array_foreach(json_object_get(graph, "devices"), i, d)
    {
        const char *n = json_string_value(json_object_get(d, "name"));
        if (n && strcmp(n, name) == 0) return 1;
    }
    return 0;
}

static void check_result(const json_t *spec, const json_t *r)
{
    const json_t *graph = json_object_get(spec, "graph");
    FUZZ_CHECK(json_is_object(r), "the result is not an object");
    FUZZ_CHECK(json_is_string(json_object_get(r, "best")), "no best");
    const json_t *cands = json_object_get(r, "candidates");
    FUZZ_CHECK(json_is_array(cands) && json_array_size(cands) > 0, "no candidates");
    const json_t *plan = json_object_get(r, "plan");
    const json_t *placement = json_object_get(plan, "placement");
    FUZZ_CHECK(json_is_object(placement), "no plan.placement");
    size_t i;
    const json_t *op;
    json_array_foreach(json_object_get(graph, "ops"), i, op)
    {
        const char *name = json_string_value(json_object_get(op, "name"));
        const char *dev = json_string_value(json_object_get(placement, name));
        FUZZ_CHECK(dev != NULL, "op '%s' is not placed", name);
        FUZZ_CHECK(is_device(graph, dev), "op '%s' is placed on '%s', not a device of the graph", name, dev);
    }
    FUZZ_CHECK(json_object_size(placement) == json_array_size(json_object_get(graph, "ops")), "placement has extra ops");
    FUZZ_CHECK(json_is_array(json_object_get(plan, "devices")), "no plan.devices");
    if (!fuzz_known("nonfinite-result")) {
        const json_t *makespan = json_object_get(json_object_get(r, "metrics"), "makespan_us");
        FUZZ_CHECK(json_is_number(makespan) && isfinite(json_number_value(makespan)),
                   "metrics.makespan_us is missing or not a finite number");
        const json_t *c;
        json_array_foreach(cands, i, c)
        {
            if (!json_is_true(json_object_get(c, "feasible"))) continue;
            FUZZ_CHECK(json_is_number(json_object_get(c, "makespan_us")), "candidates[%zu] has no makespan_us", i);
            FUZZ_CHECK(json_array_size(json_object_get(c, "busy_us")) == json_array_size(json_object_get(graph, "devices")),
                       "candidates[%zu].busy_us lacks devices", i);
        }
    }
    char *s = json_dumps(r, JSON_COMPACT);
    FUZZ_CHECK(s != NULL, "the result cannot be serialised");
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *in = json_loadb((const char *)data, size, 0, &jerr);
    if (!in) return 0;
    json_t *spec = in;
    if (json_is_object(in) && !json_object_get(in, "graph") && json_object_get(in, "ops"))
        spec = json_pack("{s:O, s:[s]}", "graph", in, "algorithms", "all");
    if (!spec) abort();

    char field[256] = "", msg[512] = "", err[512] = ""; /* the sizes api_jobs.c and workers/main.c use */
    int rc = place_spec_validate(spec, field, sizeof field, msg, sizeof msg);
    FUZZ_CHECK(rc == 0 || rc == -1, "place_spec_validate returned %d", rc);
    if (rc < 0) {
        FUZZ_CHECK(field[0] != '\0' && msg[0] != '\0', "refused without a field or message");
        if (!fuzz_known("place-utf8-error-text"))
            FUZZ_CHECK(fuzz_utf8_valid(field) && fuzz_utf8_valid(msg), "error text is not UTF-8: field '%s', msg '%s'", field, msg);
        json_t *r = place_solve(spec, err, sizeof err); /* stops at the same validation */
        FUZZ_CHECK(r == NULL, "place_solve accepted a spec place_spec_validate refuses (%s: %s)", field, msg);
        FUZZ_CHECK(err[0] != '\0', "place_solve failed without a message");
    } else if (json_array_size(json_object_get(json_object_get(spec, "graph"), "ops")) < SOLVE_MAX_OPS) {
        json_t *r = place_solve(spec, err, sizeof err);
        if (r) {
            check_result(spec, r);
            json_decref(r);
        } else {
            FUZZ_CHECK(err[0] != '\0', "place_solve failed without a message");
            if (!fuzz_known("place-utf8-error-text")) FUZZ_CHECK(fuzz_utf8_valid(err), "error text is not UTF-8: '%s'", err);
        }
    }
    if (spec != in) json_decref(spec);
    json_decref(in);
    return 0;
}
