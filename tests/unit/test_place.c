/* test_place.c - unit tests of the placement library (workers/place):
 * graph parsing and field-named errors, m-TOPO, the single-device candidate,
 * the simulator against hand-computed timelines, and the solver. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workers/place/algo.h"
#include "spec/place_graph.h"
#include "workers/place/place.h"
#include "workers/place/plan.h"
#include "workers/place/sim.h"

/* ---- helpers ---- */

/* JSON written with single quotes for readability. */
static place_graph *parse_ok(const char *text)
{
    char field[160] = "", msg[320] = "";
    json_t *j = J(text);
    place_graph *g = place_graph_parse(j, "spec.graph", field, sizeof field, msg, sizeof msg);
    json_decref(j);
    if (!g) fail_msg("unexpected parse error: %s: %s", field, msg);
    return g;
}

static int op_index(const place_graph *g, const char *name)
{
    for (int i = 0; i < g->n_ops; i++)
        if (strcmp(g->ops[i].name, name) == 0) return i;
    fail_msg("no op %s", name);
    return -1;
}

/* A plan from "op:device" pairs in topological order. */
static place_plan *plan_of(const place_graph *g, const int *devs)
{
    place_plan *p = place_plan_new(g->n_ops);
    assert_non_null(p);
    for (int i = 0; i < g->n_ops; i++) {
        p->device[i] = devs[i];
        p->order[i] = g->topo[i];
    }
    return p;
}

static void assert_close(double got, double want)
{
    if (got < want - 1e-6 || got > want + 1e-6) fail_msg("got %.9f, want %.9f", got, want);
}

/* ---- graph parsing ---- */

static void test_parse_basic(void **state)
{
    (void)state;
    place_graph *g = parse_ok("{'ops':[{'name':'x','compute_us':5,'output_bytes':[10,20],'persistent_bytes':7},"
                              "{'name':'y','compute_us':1.5,'temp_bytes':3,'group':'g','extra':1},"
                              "{'name':'z','compute_us':0,'output_bytes':4,'group':'g'}],"
                              "'edges':[{'src':'z','dst':'x'},{'src':'x','dst':'y','bytes':8e0}],"
                              "'devices':[{'name':'d0','memory_bytes':1e9},{'name':'d1','memory_bytes':100,'speed':2}],"
                              "'unknown':{'ignored':true}}");
    assert_int_equal(g->n_ops, 3);
    assert_int_equal(g->n_edges, 2);
    assert_int_equal(g->n_devices, 2);
    assert_int_equal(g->ops[0].output_bytes, 30);
    assert_int_equal(g->ops[2].output_bytes, 4);
    assert_int_equal(g->edges[0].bytes, 4); /* defaults to the producer's outputs */
    assert_int_equal(g->edges[1].bytes, 8);
    assert_int_equal(g->n_groups, 1);
    assert_int_equal(g->ops[1].group, g->ops[2].group);
    assert_int_equal(g->ops[0].group, -1);
    assert_int_equal(g->devices[0].memory_bytes, 1000000000);
    assert_close(g->devices[0].speed, 1.0);
    assert_close(place_op_time(g, 1, 1), 0.75);
    assert_int_equal(place_op_memory(g, 0), 37);
    /* default comm: 134 us + bytes / 5701 */
    assert_close(place_comm_time(g, 0, 1, 5701), 135.0);
    assert_close(place_comm_time(g, 1, 1, 5701), 0.0);
    /* z must precede x, and x precedes y */
    assert_int_equal(g->topo[0], 2);
    assert_int_equal(g->topo[1], 0);
    assert_int_equal(g->topo[2], 1);
    place_graph_free(g);
}

static void test_topo_tie_break_is_input_order(void **state)
{
    (void)state;
    place_graph *g = parse_ok("{'ops':[{'name':'x','compute_us':1},{'name':'y','compute_us':1},{'name':'z','compute_us':1},"
                              "{'name':'w','compute_us':1}],'edges':[{'src':'z','dst':'x'},{'src':'w','dst':'y'}],"
                              "'devices':[{'name':'d','memory_bytes':1}]}");
    /* ready at start: z, w; z first (input order), which frees x (index 0) */
    int want[] = {2, 0, 3, 1};
    for (int i = 0; i < 4; i++)
        assert_int_equal(g->topo[i], want[i]);
    for (int i = 0; i < 4; i++)
        assert_int_equal(g->topo_pos[g->topo[i]], i);
    place_graph_free(g);
}

static void test_comm_matrix(void **state)
{
    (void)state;
    place_graph *g = parse_ok("{'ops':[{'name':'a','compute_us':1}],"
                              "'devices':[{'name':'d0','memory_bytes':1},{'name':'d1','memory_bytes':1}],"
                              "'comm':{'latency_us':[[0,5],[7,0]],'bytes_per_us':[[1,10],[20,1]]}}");
    assert_close(place_comm_time(g, 0, 1, 100), 15.0);
    assert_close(place_comm_time(g, 1, 0, 100), 12.0);
    place_graph_free(g);
}

typedef struct bad_case {
    const char *spec; /* a whole spec; {G} stands for a valid graph body prefix */
    const char *field;
    const char *msg; /* substring */
} bad_case;

#define DEV "'devices':[{'name':'d','memory_bytes':100}]"
#define OPS3 "'ops':[{'name':'a','compute_us':1},{'name':'b','compute_us':1},{'name':'c','compute_us':1}]"

static const bad_case BAD[] = {
    {"[]", "spec", "must be an object"},
    {"{'algorithms':['m-topo']}", "spec.graph", "is required"},
    {"{'graph':[]}", "spec.graph", "must be an object"},
    {"{'graph':{" DEV "}}", "spec.graph.ops", "is required"},
    {"{'graph':{'ops':[]," DEV "}}", "spec.graph.ops", "at least one op"},
    {"{'graph':{'ops':[{'name':'a','compute_us':1},{'name':'b','compute_us':1},{'name':'c','compute_us':1},"
     "{'name':'d','compute_us':-1}]," DEV "}}",
     "spec.graph.ops[3].compute_us", "must be a non-negative number"},
    {"{'graph':{'ops':[{'name':'a'}]," DEV "}}", "spec.graph.ops[0].compute_us", "is required"},
    {"{'graph':{'ops':[{'name':'a','compute_us':'5'}]," DEV "}}", "spec.graph.ops[0].compute_us", "must be a non-negative number"},
    {"{'graph':{'ops':[{'compute_us':1}]," DEV "}}", "spec.graph.ops[0].name", "is required"},
    {"{'graph':{'ops':[{'name':'','compute_us':1}]," DEV "}}", "spec.graph.ops[0].name", "must not be empty"},
    {"{'graph':{'ops':[{'name':'a','compute_us':1},{'name':'b','compute_us':1},{'name':'a','compute_us':1}]," DEV "}}",
     "spec.graph.ops[2].name", "duplicate op name 'a' (also ops[0])"},
    {"{'graph':{'ops':[{'name':'a','compute_us':1,'output_bytes':[1,-2]}]," DEV "}}", "spec.graph.ops[0].output_bytes[1]",
     "non-negative integer"},
    {"{'graph':{'ops':[{'name':'a','compute_us':1,'temp_bytes':1.5}]," DEV "}}", "spec.graph.ops[0].temp_bytes",
     "non-negative integer"},
    {"{'graph':{'ops':[{'name':'a','compute_us':1,'persistent_bytes':2e12}]," DEV "}}", "spec.graph.ops[0].persistent_bytes",
     "at most"},
    {"{'graph':{'ops':[{'name':'a','compute_us':1,'group':3}]," DEV "}}", "spec.graph.ops[0].group", "non-empty string"},
    {"{'graph':{" OPS3 ",'edges':[{'src':'a','dst':'b'},{'src':'a','dst':'c'},{'src':'b','dst':'c'},{'src':'a','dst':'c'},"
     "{'src':'a','dst':'c'},{'src':'a','dst':'c'},{'src':'a','dst':'c'},{'src':'a','dst':'foo'}]," DEV "}}",
     "spec.graph.edges[7].dst", "no op named 'foo'"},
    {"{'graph':{" OPS3 ",'edges':[{'dst':'b'}]," DEV "}}", "spec.graph.edges[0].src", "is required"},
    {"{'graph':{" OPS3 ",'edges':[{'src':'a','dst':'b','bytes':-1}]," DEV "}}", "spec.graph.edges[0].bytes",
     "non-negative integer"},
    {"{'graph':{" OPS3 ",'edges':{}," DEV "}}", "spec.graph.edges", "must be an array"},
    {"{'graph':{" OPS3 ",'edges':[{'src':'a','dst':'b'},{'src':'b','dst':'c'},{'src':'c','dst':'b'}]," DEV "}}", "spec.graph.edges",
     "graph has a cycle through op 'b'"},
    {"{'graph':{" OPS3 ",'edges':[{'src':'c','dst':'c'}]," DEV "}}", "spec.graph.edges", "graph has a cycle through op 'c'"},
    {"{'graph':{" OPS3 "}}", "spec.graph.devices", "is required"},
    {"{'graph':{" OPS3 ",'devices':[]}}", "spec.graph.devices", "at least one device"},
    {"{'graph':{" OPS3 ",'devices':[{'name':'d'}]}}", "spec.graph.devices[0].memory_bytes", "is required"},
    {"{'graph':{" OPS3 ",'devices':[{'name':'d','memory_bytes':1,'speed':0}]}}", "spec.graph.devices[0].speed",
     "must be a positive number"},
    {"{'graph':{" OPS3 ",'devices':[{'name':'d','memory_bytes':1},{'name':'d','memory_bytes':1}]}}", "spec.graph.devices[1].name",
     "duplicate device name"},
    {"{'graph':{" OPS3 "," DEV ",'comm':[]}}", "spec.graph.comm", "must be an object"},
    {"{'graph':{" OPS3 "," DEV ",'comm':{'bytes_per_us':0}}}", "spec.graph.comm.bytes_per_us", "must be a positive number"},
    {"{'graph':{" OPS3
     ",'devices':[{'name':'d','memory_bytes':1},{'name':'e','memory_bytes':1}],'comm':{'latency_us':[[0,1],[1]]}}}",
     "spec.graph.comm.latency_us[1]", "array of 2 numbers"},
    {"{'graph':{" OPS3 "," DEV ",'comm':{'latency_us':[[0,1],[1,0]]}}}", "spec.graph.comm.latency_us", "1x1 matrix"},
    {"{'graph':{" OPS3 "," DEV "},'algorithms':'m-topo'}", "spec.algorithms", "must be a non-empty array"},
    {"{'graph':{" OPS3 "," DEV "},'algorithms':[]}", "spec.algorithms", "must be a non-empty array"},
    {"{'graph':{" OPS3 "," DEV "},'algorithms':['m-topo','m-foo']}", "spec.algorithms[1]",
     "must be \"m-topo\", \"m-etf\", \"m-sct\", \"single\" or \"all\""},
    {"{'graph':{" OPS3 "," DEV "},'algorithms':[3]}", "spec.algorithms[0]", "must be \"m-topo\""},
    {"{'graph':{" OPS3 "," DEV "},'fuse':'yes'}", "spec.fuse", "must be true or false"},
    {"{'graph':{" OPS3 "," DEV "},'coplace':1}", "spec.coplace", "must be true or false"},
    {"{'graph':{" OPS3 "," DEV "},'fuze':true}", "spec.fuze",
     "unknown field 'fuze' (known: graph, strategy, algorithms, fuse, coplace)"},
};

static void test_spec_errors_name_the_field(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char field[160] = "", msg[320] = "", err[512] = "";
        json_t *spec = J(BAD[i].spec);
        int rc = place_spec_validate(spec, field, sizeof field, msg, sizeof msg);
        if (rc != -1 || strcmp(field, BAD[i].field) != 0 || !strstr(msg, BAD[i].msg))
            fail_msg("case %zu: rc %d field '%s' msg '%s'; want field '%s' msg '%s'", i, rc, field, msg, BAD[i].field, BAD[i].msg);
        /* place_solve reports the same problem as "field: message" */
        json_t *r = place_solve(spec, err, sizeof err);
        assert_null(r);
        assert_true(strncmp(err, BAD[i].field, strlen(BAD[i].field)) == 0);
        json_decref(spec);
    }
}

static void test_spec_valid(void **state)
{
    (void)state;
    char field[160], msg[320];
    const char *ok[] = {
        "{'graph':{" OPS3 "," DEV "}}",
        "{'graph':{" OPS3 "," DEV "},'algorithms':['all'],'fuse':true,'coplace':false}",
        "{'graph':{" OPS3 "," DEV ",'whatever':[1]},'algorithms':null,'fuse':null}", /* the graph's unknown fields are ignored */
        "{'graph':{" OPS3 "," DEV ",'edges':null,'comm':{'latency_us':0}},'algorithms':['single','m-topo','single']}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        json_t *spec = J(ok[i]);
        if (place_spec_validate(spec, field, sizeof field, msg, sizeof msg) != 0) fail_msg("case %zu: %s: %s", i, field, msg);
        json_decref(spec);
    }
}

static void test_device_limit(void **state)
{
    (void)state;
    json_t *devs = json_array();
    for (int i = 0; i <= PLACE_MAX_DEVICES; i++) {
        char name[16];
        snprintf(name, sizeof name, "d%d", i);
        json_array_append_new(devs, json_pack("{s:s,s:i}", "name", name, "memory_bytes", 1));
    }
    json_t *g = J("{" OPS3 "}");
    json_object_set_new(g, "devices", devs);
    char field[160], msg[320];
    assert_null(place_graph_parse(g, "spec.graph", field, sizeof field, msg, sizeof msg));
    assert_string_equal(field, "spec.graph.devices");
    assert_non_null(strstr(msg, "at most 1024"));
    json_decref(g);
}

/* ---- m-TOPO ---- */

static void test_topo_fills_devices_in_order(void **state)
{
    (void)state;
    /* six ops of 100 bytes in a chain, edges of 0 bytes: two per device */
    place_graph *g =
        parse_ok("{'ops':[{'name':'o0','compute_us':1,'persistent_bytes':100},"
                 "{'name':'o1','compute_us':1,'persistent_bytes':60,'temp_bytes':40},"
                 "{'name':'o2','compute_us':1,'output_bytes':[100]},{'name':'o3','compute_us':1,'persistent_bytes':100},"
                 "{'name':'o4','compute_us':1,'persistent_bytes':100},{'name':'o5','compute_us':1,'persistent_bytes':100}],"
                 "'edges':[{'src':'o0','dst':'o1'},{'src':'o1','dst':'o2'},{'src':'o2','dst':'o3','bytes':0},"
                 "{'src':'o3','dst':'o4'},{'src':'o4','dst':'o5'}],"
                 "'devices':[{'name':'d0','memory_bytes':250},{'name':'d1','memory_bytes':250},"
                 "{'name':'d2','memory_bytes':200}]}");
    place_plan *p = place_plan_new(g->n_ops);
    char reason[256];
    assert_int_equal(place_algo_topo(g, p, reason, sizeof reason), 0);
    int want[] = {0, 0, 1, 1, 2, 2};
    for (int i = 0; i < 6; i++)
        assert_int_equal(p->device[i], want[i]);
    place_sim_result r;
    assert_int_equal(place_simulate(g, p, &r), 0);
    assert_true(r.feasible);
    for (int d = 0; d < 3; d++)
        assert_true(r.peak_bytes[d] <= g->devices[d].memory_bytes);
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_topo_frees_outputs_after_last_consumer(void **state)
{
    (void)state;
    /* a -> b -> c -> d with 100-byte outputs on 250-byte devices.  Each
     * output is read only by the next op on the same device, so it is
     * freed after that op: the bound peaks at 200 (an op running with its
     * input and its own output) and m-TOPO keeps the chain on d0 (charging
     * every output for the whole step would need 400).  d's output, read
     * by nobody, stays to the end. */
    place_graph *g =
        parse_ok("{'ops':[{'name':'a','compute_us':1,'output_bytes':[100]},{'name':'b','compute_us':1,'output_bytes':[100]},"
                 "{'name':'c','compute_us':1,'output_bytes':[100]},{'name':'d','compute_us':1,'output_bytes':[100]}],"
                 "'edges':[{'src':'a','dst':'b'},{'src':'b','dst':'c'},{'src':'c','dst':'d'}],"
                 "'devices':[{'name':'d0','memory_bytes':250},{'name':'d1','memory_bytes':250}]}");
    place_plan *p = place_plan_new(g->n_ops);
    char reason[256];
    assert_int_equal(place_algo_topo(g, p, reason, sizeof reason), 0);
    for (int i = 0; i < 4; i++)
        assert_int_equal(p->device[i], 0);
    place_sim_result r;
    assert_int_equal(place_simulate(g, p, &r), 0);
    assert_true(r.feasible);
    assert_int_equal(r.peak_bytes[0], 200);
    place_sim_result_clear(&r);
    place_plan_free(p);

    /* 150-byte devices: b fits neither on d0 (running with a's output and
     * its own: 200) nor on d1 (a's received copy and its own output: 200) */
    g->devices[0].memory_bytes = g->devices[1].memory_bytes = 150;
    p = place_plan_new(g->n_ops);
    assert_int_equal(place_algo_topo(g, p, reason, sizeof reason), -1);
    assert_non_null(strstr(reason, "missing"));
    place_plan_free(p);
    place_graph_free(g);
}

static void test_topo_charges_received_tensors(void **state)
{
    (void)state;
    /* a (100) fills most of d0; b (100) goes to d1 and must also hold a's
     * 80-byte tensor: 180 > 150, so b skips to d2 */
    place_graph *g = parse_ok("{'ops':[{'name':'a','compute_us':1,'persistent_bytes':20,'output_bytes':[80]},"
                              "{'name':'b','compute_us':1,'persistent_bytes':100}],"
                              "'edges':[{'src':'a','dst':'b'}],"
                              "'devices':[{'name':'d0','memory_bytes':150},{'name':'d1','memory_bytes':150},"
                              "{'name':'d2','memory_bytes':180}]}");
    place_plan *p = place_plan_new(g->n_ops);
    char reason[256];
    assert_int_equal(place_algo_topo(g, p, reason, sizeof reason), 0);
    assert_int_equal(p->device[0], 0);
    assert_int_equal(p->device[1], 2);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_topo_keeps_groups_together(void **state)
{
    (void)state;
    place_graph *g = parse_ok("{'ops':[{'name':'a','compute_us':1,'persistent_bytes':100},"
                              "{'name':'b','compute_us':1,'persistent_bytes':100,'group':'g'},"
                              "{'name':'c','compute_us':1,'persistent_bytes':100},"
                              "{'name':'d','compute_us':1,'persistent_bytes':100,'group':'g'},"
                              "{'name':'e','compute_us':1,'persistent_bytes':100}],"
                              "'edges':[{'src':'a','dst':'b','bytes':0},{'src':'b','dst':'c','bytes':0},"
                              "{'src':'c','dst':'d','bytes':0},{'src':'d','dst':'e','bytes':0}],"
                              "'devices':[{'name':'d0','memory_bytes':300},{'name':'d1','memory_bytes':300}]}");
    place_plan *p = place_plan_new(g->n_ops);
    char reason[256];
    assert_int_equal(place_algo_topo(g, p, reason, sizeof reason), 0);
    /* the group {b, d} is placed whole when b comes: d0 is then full */
    assert_int_equal(p->device[op_index(g, "a")], 0);
    assert_int_equal(p->device[op_index(g, "b")], 0);
    assert_int_equal(p->device[op_index(g, "d")], 0);
    assert_int_equal(p->device[op_index(g, "c")], 1);
    assert_int_equal(p->device[op_index(g, "e")], 1);
    place_sim_result r;
    assert_int_equal(place_simulate(g, p, &r), 0);
    assert_true(r.feasible);
    assert_int_equal(r.transfers, 3); /* b -> c, c -> d, d -> e cross (0 bytes each) */
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_topo_group_too_big_names_group(void **state)
{
    (void)state;
    place_graph *g = parse_ok("{'ops':[{'name':'x','compute_us':1,'persistent_bytes':60,'group':'big'},"
                              "{'name':'y','compute_us':1,'persistent_bytes':60,'group':'big'}],"
                              "'devices':[{'name':'d0','memory_bytes':100},{'name':'d1','memory_bytes':100}]}");
    place_plan *p = place_plan_new(g->n_ops);
    char reason[256];
    assert_int_equal(place_algo_topo(g, p, reason, sizeof reason), -1);
    assert_string_equal(reason, "op 'x' (group 'big', 2 ops) needs 120 bytes but the largest free device memory is 100 bytes "
                                "on 'd0' (missing 20 bytes)");
    place_plan_free(p);
    place_graph_free(g);
}

static void test_infeasible_names_op_and_missing_bytes(void **state)
{
    (void)state;
    const char *spec_text = "{'graph':{'ops':[{'name':'fc6','compute_us':10,'persistent_bytes':800000},"
                            "{'name':'fc7','compute_us':10,'persistent_bytes':5000000},{'name':'fc8','compute_us':1}],"
                            "'edges':[{'src':'fc6','dst':'fc7','bytes':0},{'src':'fc7','dst':'fc8','bytes':0}],"
                            "'devices':[{'name':'gpu0','memory_bytes':2000000},{'name':'gpu1','memory_bytes':1000000}]},"
                            "'algorithms':['all']}";
    json_t *spec = J(spec_text);
    char err[512] = "";
    assert_null(place_solve(spec, err, sizeof err));
    const char *want = "op 'fc7' needs 5000000 bytes but the largest free device memory is 1200000 bytes on 'gpu0' "
                       "(missing 3800000 bytes)";
    if (!strstr(err, want)) fail_msg("error was: %s", err);
    assert_non_null(strstr(err, "m-topo"));
    json_decref(spec);
}

/* ---- single ---- */

static void test_single_picks_fastest_fitting_device(void **state)
{
    (void)state;
    place_graph *g = parse_ok("{'ops':[{'name':'a','compute_us':8,'persistent_bytes':100}],"
                              "'devices':[{'name':'slow','memory_bytes':1000},{'name':'fast_small','memory_bytes':50,'speed':8},"
                              "{'name':'fast','memory_bytes':100,'speed':4},{'name':'fast2','memory_bytes':100,'speed':4}]}");
    place_plan *p = place_plan_new(g->n_ops);
    char reason[256];
    assert_int_equal(place_algo_single(g, p, reason, sizeof reason), 0);
    assert_int_equal(p->device[0], 2);
    place_plan_free(p);
    place_graph_free(g);

    g = parse_ok("{'ops':[{'name':'a','compute_us':8,'persistent_bytes':100},{'name':'b','compute_us':8,'temp_bytes':50}],"
                 "'devices':[{'name':'d0','memory_bytes':120},{'name':'d1','memory_bytes':90}]}");
    p = place_plan_new(g->n_ops);
    assert_int_equal(place_algo_single(g, p, reason, sizeof reason), -1);
    assert_string_equal(reason,
                        "all 2 ops peak at 150 bytes on one device but the largest device 'd0' has 120 bytes (missing 30 bytes)");
    place_plan_free(p);
    place_graph_free(g);

    /* a -> b -> c, 100-byte outputs: charged all at once they need 300
     * bytes, but one device frees a's output once b ran: the peak is 200
     * (b running with a's output and its own), and the 250-byte device
     * holds the whole chain */
    g = parse_ok("{'ops':[{'name':'a','compute_us':1,'output_bytes':[100]},{'name':'b','compute_us':1,'output_bytes':[100]},"
                 "{'name':'c','compute_us':1,'output_bytes':[100]}],'edges':[{'src':'a','dst':'b'},{'src':'b','dst':'c'}],"
                 "'devices':[{'name':'d0','memory_bytes':250}]}");
    p = place_plan_new(g->n_ops);
    assert_int_equal(place_algo_single(g, p, reason, sizeof reason), 0);
    assert_int_equal(p->device[2], 0);
    place_plan_free(p);
    place_graph_free(g);
}

/* ---- simulator ---- */

#define CHAIN3                                                                                                                     \
    "{'ops':[{'name':'a','compute_us':100,'persistent_bytes':1000,'output_bytes':[500]},"                                          \
    "{'name':'b','compute_us':200,'persistent_bytes':1000,'output_bytes':[250],'temp_bytes':100},"                                 \
    "{'name':'c','compute_us':50,'persistent_bytes':1000,'output_bytes':[10]}],"                                                   \
    "'edges':[{'src':'a','dst':'b'},{'src':'b','dst':'c'}],"                                                                       \
    "'devices':[{'name':'d0','memory_bytes':4000},{'name':'d1','memory_bytes':4000,'speed':2}],"                                   \
    "'comm':{'latency_us':10,'bytes_per_us':50}}"

static void test_sim_chain_across_two_devices(void **state)
{
    (void)state;
    place_graph *g = parse_ok(CHAIN3);
    int devs[] = {0, 1, 0};
    place_plan *p = plan_of(g, devs);
    place_sim_result r;
    assert_int_equal(place_simulate(g, p, &r), 0);
    assert_true(r.feasible);
    /* a 0-100 on d0; a->b 500 B: 10 + 500/50 = 20 us, 100-120; b on d1 at
     * speed 2: 120-220; b->c 250 B: 10 + 5 = 15 us, 220-235; c 235-285 */
    assert_close(r.start_us[1], 120);
    assert_close(r.end_us[1], 220);
    assert_close(r.start_us[2], 235);
    assert_close(r.makespan_us, 285);
    assert_close(r.busy_us[0], 150);
    assert_close(r.busy_us[1], 100);
    assert_int_equal(r.transfers, 2);
    assert_int_equal(r.transfer_bytes, 750);
    assert_int_equal(r.ops[0], 2);
    assert_int_equal(r.ops[1], 1);
    /* d0: persistent 2000; a runs: +500 = 2500 (freed once sent at 120);
     * the copy of b's output arrives: +250; c runs: +10 -> 2260.
     * d1: 1000; copy of a +500; b +250 +100 -> 1850 */
    assert_int_equal(r.peak_bytes[0], 2500);
    assert_int_equal(r.peak_bytes[1], 1850);
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_sim_memory_peak_on_one_device(void **state)
{
    (void)state;
    /* x feeds y and z; y's output feeds z.  Persistent 10 each = 30.
     * x: +100 out +5 temp = 135, end -> 130.  y: +40 +20 = 190, end -> 170.
     * z: +1 +7 = 178 (peak 190), end: temp -7, x's and y's outputs freed. */
    place_graph *g = parse_ok("{'ops':[{'name':'x','compute_us':1,'persistent_bytes':10,'output_bytes':[100],'temp_bytes':5},"
                              "{'name':'y','compute_us':1,'persistent_bytes':10,'output_bytes':[40],'temp_bytes':20},"
                              "{'name':'z','compute_us':1,'persistent_bytes':10,'output_bytes':[1],'temp_bytes':7}],"
                              "'edges':[{'src':'x','dst':'y'},{'src':'x','dst':'z'},{'src':'y','dst':'z'}],"
                              "'devices':[{'name':'d','memory_bytes':190}]}");
    int devs[] = {0, 0, 0};
    place_plan *p = plan_of(g, devs);
    place_sim_result r;
    assert_int_equal(place_simulate(g, p, &r), 0);
    assert_true(r.feasible);
    assert_int_equal(r.peak_bytes[0], 190);
    assert_close(r.makespan_us, 3);
    place_sim_result_clear(&r);
    place_plan_free(p);

    /* one byte less capacity: rejected, with the device named */
    g->devices[0].memory_bytes = 189;
    p = plan_of(g, devs);
    assert_int_equal(place_simulate(g, p, &r), 0);
    assert_false(r.feasible);
    assert_non_null(strstr(r.reason, "device 'd' needs 190 bytes"));
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_sim_tensor_reused_on_remote_device(void **state)
{
    (void)state;
    place_graph *g = parse_ok("{'ops':[{'name':'a','compute_us':10,'output_bytes':[1000]},"
                              "{'name':'b','compute_us':10},{'name':'c','compute_us':10}],"
                              "'edges':[{'src':'a','dst':'b'},{'src':'a','dst':'c'}],"
                              "'devices':[{'name':'d0','memory_bytes':5000},{'name':'d1','memory_bytes':5000}],"
                              "'comm':{'latency_us':1,'bytes_per_us':100}}");
    int devs[] = {0, 1, 1};
    place_plan *p = plan_of(g, devs);
    place_sim_result r;
    assert_int_equal(place_simulate(g, p, &r), 0);
    assert_true(r.feasible);
    assert_int_equal(r.transfers, 1);
    assert_int_equal(r.transfer_bytes, 1000);
    /* a 0-10, transfer 10-21, b 21-31, c 31-41 */
    assert_close(r.makespan_us, 41);
    assert_int_equal(r.peak_bytes[1], 1000); /* one received copy */
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_sim_send_channel_is_shared(void **state)
{
    (void)state;
    /* a on d0 feeds b on d1 and c on d2: both transfers need d0's send
     * channel, so the second waits for the first (d1 goes first). */
    place_graph *g = parse_ok("{'ops':[{'name':'a','compute_us':10,'output_bytes':[1000]},"
                              "{'name':'b','compute_us':10},{'name':'c','compute_us':10}],"
                              "'edges':[{'src':'a','dst':'b'},{'src':'a','dst':'c'}],"
                              "'devices':[{'name':'d0','memory_bytes':5000},{'name':'d1','memory_bytes':5000},"
                              "{'name':'d2','memory_bytes':5000}],"
                              "'comm':{'latency_us':1,'bytes_per_us':100}}");
    int devs[] = {0, 1, 2};
    place_plan *p = plan_of(g, devs);
    place_sim_result r;
    assert_int_equal(place_simulate(g, p, &r), 0);
    assert_int_equal(r.transfers, 2);
    assert_close(r.start_us[1], 21);
    assert_close(r.start_us[2], 32);
    assert_close(r.makespan_us, 42);
    assert_int_equal(r.peak_bytes[0], 1000);
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_sim_rejects_bad_order(void **state)
{
    (void)state;
    place_graph *g = parse_ok(CHAIN3);
    int devs[] = {0, 0, 0};
    place_plan *p = plan_of(g, devs);
    p->order[0] = 1; /* b before a on d0 */
    p->order[1] = 0;
    place_sim_result r;
    assert_int_equal(place_simulate(g, p, &r), 0);
    assert_false(r.feasible);
    assert_string_equal(r.reason, "op 'b' is ordered before its input 'a' on device 'd0'");
    place_sim_result_clear(&r);

    /* across devices the order can deadlock: c (needs b) before a on d0 */
    devs[1] = 1;
    place_plan_free(p);
    p = plan_of(g, devs);
    p->order[0] = 2, p->order[1] = 0, p->order[2] = 1;
    assert_int_equal(place_simulate(g, p, &r), 0);
    assert_false(r.feasible);
    assert_non_null(strstr(r.reason, "deadlock"));
    place_sim_result_clear(&r);

    p->device[0] = 7;
    assert_int_equal(place_simulate(g, p, &r), -1);
    assert_non_null(strstr(r.reason, "op 'a' has no valid device"));
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

/* ---- solver ---- */

static void test_solve_prefers_single_when_faster(void **state)
{
    (void)state;
    /* Everything fits the fast device d1; m-TOPO fills the slow d0 first. */
    json_t *spec = J("{'graph':{'ops':[{'name':'a','compute_us':100,'persistent_bytes':10},"
                     "{'name':'b','compute_us':100,'persistent_bytes':10}],'edges':[{'src':'a','dst':'b'}],"
                     "'devices':[{'name':'d0','memory_bytes':1000},{'name':'d1','memory_bytes':1000,'speed':4}]}}");
    char err[512];
    json_t *r = place_solve(spec, err, sizeof err);
    if (!r) fail_msg("%s", err);
    assert_string_equal(json_string_value(json_object_get(r, "best")), "single");
    json_t *cands = json_object_get(r, "candidates");
    assert_int_equal(json_array_size(cands), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(cands, 0), "algorithm")), "m-topo");
    assert_close(json_real_value(json_object_get(json_array_get(cands, 0), "makespan_us")), 200);
    assert_close(json_real_value(json_object_get(json_array_get(cands, 1), "makespan_us")), 50);
    json_t *plan = json_object_get(r, "plan");
    assert_string_equal(json_string_value(json_object_get(plan, "algorithm")), "single");
    assert_string_equal(json_string_value(json_object_get(json_object_get(plan, "placement"), "a")), "d1");
    assert_close(json_real_value(json_object_get(json_object_get(r, "metrics"), "makespan_us")), 50);
    json_decref(r);
    json_decref(spec);
}

static void test_solve_m_topo_when_single_does_not_fit(void **state)
{
    (void)state;
    json_t *spec = J("{'graph':" CHAIN3 "}");
    json_t *graph = json_object_get(spec, "graph");
    json_t *devs = json_object_get(graph, "devices");
    json_object_set_new(json_array_get(devs, 0), "memory_bytes", json_integer(3000));
    json_object_set_new(json_array_get(devs, 1), "memory_bytes", json_integer(3000));
    char err[512];
    json_t *r = place_solve(spec, err, sizeof err);
    if (!r) fail_msg("%s", err);
    assert_string_equal(json_string_value(json_object_get(r, "best")), "m-topo");
    /* single was not requested and does not fit: not listed */
    json_t *cands = json_object_get(r, "candidates");
    assert_int_equal(json_array_size(cands), 1);
    json_t *c0 = json_array_get(cands, 0);
    assert_true(json_is_true(json_object_get(c0, "feasible")));
    assert_int_equal(json_array_size(json_object_get(c0, "peak_bytes")), 2);
    assert_int_equal(json_array_size(json_object_get(c0, "busy_us")), 2);
    assert_non_null(json_object_get(c0, "transfers"));
    assert_non_null(json_object_get(c0, "transfer_bytes"));
    assert_non_null(json_object_get(c0, "placement_ms"));
    assert_null(json_object_get(c0, "reason"));
    json_t *pdevs = json_object_get(json_object_get(r, "plan"), "devices");
    assert_int_equal(json_array_size(pdevs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(pdevs, 0), "name")), "d0");
    assert_int_equal(json_object_size(json_object_get(json_object_get(r, "plan"), "placement")), 3);
    json_t *m = json_object_get(r, "metrics");
    assert_int_equal(json_integer_value(json_object_get(m, "ops")), 3);
    assert_int_equal(json_integer_value(json_object_get(m, "devices")), 2);
    json_decref(r);

    /* asked for explicitly, an infeasible single is listed with its reason */
    json_object_set_new(spec, "algorithms", J("['single','m-topo']"));
    r = place_solve(spec, err, sizeof err);
    assert_non_null(r);
    cands = json_object_get(r, "candidates");
    assert_int_equal(json_array_size(cands), 2);
    assert_false(json_is_true(json_object_get(json_array_get(cands, 0), "feasible")));
    assert_non_null(strstr(json_string_value(json_object_get(json_array_get(cands, 0), "reason")), "missing"));
    assert_string_equal(json_string_value(json_object_get(r, "best")), "m-topo");
    json_decref(r);
    json_decref(spec);
}

/* ---- a 10k-op layered DAG ---- */

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng_state >> 33) % n;
}

/* Layers of `width` ops; each reads 1-3 ops of the previous layer. */
static json_t *layered_graph(int n_ops, int width, int n_devices, uint64_t seed)
{
    json_t *ops = json_array(), *edges = json_array(), *devs = json_array();
    int64_t total = 0;
    rng_state = seed;
    for (int i = 0; i < n_ops; i++) {
        char name[16];
        snprintf(name, sizeof name, "op%d", i);
        json_int_t out = (json_int_t)(1 + rnd(64)) * 16384, temp = (json_int_t)rnd(8) * 16384, pers = (json_int_t)rnd(32) * 65536;
        total += out + temp + pers;
        json_array_append_new(ops, json_pack("{s:s,s:f,s:I,s:I,s:[I]}", "name", name, "compute_us", 10.0 + rnd(490), "temp_bytes",
                                             temp, "persistent_bytes", pers, "output_bytes", out));
        int layer = i / width;
        if (layer == 0) continue;
        int k = 1 + (int)rnd(3);
        for (int j = 0; j < k; j++) {
            char src[16];
            snprintf(src, sizeof src, "op%d", (layer - 1) * width + (int)rnd((uint32_t)width));
            json_array_append_new(edges, json_pack("{s:s,s:s}", "src", src, "dst", name));
        }
    }
    for (int d = 0; d < n_devices; d++) {
        char name[16];
        snprintf(name, sizeof name, "gpu%d", d);
        json_array_append_new(devs, json_pack("{s:s,s:I}", "name", name, "memory_bytes", (json_int_t)(total * 10 / 6 / n_devices)));
    }
    return json_pack("{s:o,s:o,s:o}", "ops", ops, "edges", edges, "devices", devs);
}

static void test_layered_10k(void **state)
{
    (void)state;
    json_t *gj = layered_graph(10000, 100, 4, 42);
    char field[160], msg[320], reason[256];
    place_graph *g = place_graph_parse(gj, "spec.graph", field, sizeof field, msg, sizeof msg);
    if (!g) fail_msg("%s: %s", field, msg);
    assert_int_equal(g->n_ops, 10000);
    place_plan *p = place_plan_new(g->n_ops);
    if (place_algo_topo(g, p, reason, sizeof reason) < 0) fail_msg("%s", reason);
    place_sim_result r;
    assert_int_equal(place_simulate(g, p, &r), 0);
    if (!r.feasible) fail_msg("%s", r.reason);
    int used = 0;
    for (int d = 0; d < g->n_devices; d++) {
        assert_true(r.peak_bytes[d] <= g->devices[d].memory_bytes);
        used += r.ops[d] > 0;
    }
    assert_true(used >= 2); /* needs about 60% of all memory: one device is not enough */
    for (int e = 0; e < g->n_edges; e++) {
        const place_edge *ed = &g->edges[e];
        double ready = r.end_us[ed->src] + place_comm_time(g, p->device[ed->src], p->device[ed->dst], 0);
        assert_true(r.start_us[ed->dst] >= ready - 1e-6);
    }
    /* ops of one device never overlap: in plan order each starts after the previous ends */
    double *last_end = calloc((size_t)g->n_devices, sizeof *last_end);
    for (int i = 0; i < g->n_ops; i++) {
        int op = p->order[i], d = p->device[op];
        assert_true(r.start_us[op] >= last_end[d] - 1e-6);
        last_end[d] = r.end_us[op];
    }
    free(last_end);
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);

    /* and through the solver, every algorithm */
    json_t *spec = json_pack("{s:o,s:[s]}", "graph", gj, "algorithms", "all");
    char err[512];
    json_t *res = place_solve(spec, err, sizeof err);
    if (!res) fail_msg("%s", err);
    assert_int_equal(json_object_size(json_object_get(json_object_get(res, "plan"), "placement")), 10000);
    json_decref(res);
    json_decref(spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_basic),
        cmocka_unit_test(test_topo_tie_break_is_input_order),
        cmocka_unit_test(test_comm_matrix),
        cmocka_unit_test(test_spec_errors_name_the_field),
        cmocka_unit_test(test_spec_valid),
        cmocka_unit_test(test_device_limit),
        cmocka_unit_test(test_topo_fills_devices_in_order),
        cmocka_unit_test(test_topo_charges_received_tensors),
        cmocka_unit_test(test_topo_frees_outputs_after_last_consumer),
        cmocka_unit_test(test_topo_keeps_groups_together),
        cmocka_unit_test(test_topo_group_too_big_names_group),
        cmocka_unit_test(test_infeasible_names_op_and_missing_bytes),
        cmocka_unit_test(test_single_picks_fastest_fitting_device),
        cmocka_unit_test(test_sim_chain_across_two_devices),
        cmocka_unit_test(test_sim_memory_peak_on_one_device),
        cmocka_unit_test(test_sim_tensor_reused_on_remote_device),
        cmocka_unit_test(test_sim_send_channel_is_shared),
        cmocka_unit_test(test_sim_rejects_bad_order),
        cmocka_unit_test(test_solve_prefers_single_when_faster),
        cmocka_unit_test(test_solve_m_topo_when_single_does_not_fit),
        cmocka_unit_test(test_layered_10k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
