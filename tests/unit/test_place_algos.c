/* test_place_algos.c - m-ETF, m-SCT, co-placement and fusion on small
 * graphs whose optimal schedules are worked out by hand in the comments. */
#include "test_place_common.c"

/* a -> {b, c} -> d.  Transfers of 1000 B take 5 + 1000/100 = 15 us. */
#define FORK_JOIN                                                                                                                  \
    "{'ops':[{'name':'a','compute_us':10,'output_bytes':[1000]},{'name':'b','compute_us':100,'output_bytes':[1000]},"              \
    "{'name':'c','compute_us':100,'output_bytes':[1000]},{'name':'d','compute_us':10}],"                                           \
    "'edges':[{'src':'a','dst':'b'},{'src':'a','dst':'c'},{'src':'b','dst':'d'},{'src':'c','dst':'d'}],"                           \
    "'devices':[{'name':'d0','memory_bytes':100000},{'name':'d1','memory_bytes':100000}],"                                         \
    "'comm':{'latency_us':5,'bytes_per_us':100}}"

static void test_etf_parallelises_fork_join(void **state)
{
    (void)state;
    place_graph *g = parse_ok(FORK_JOIN);
    place_sim_result r;
    place_plan *p = place_ok(g, place_algo_etf, &r);
    /* a on d0 0-10; b on d0 10-110 (starts first, ties by topological
     * order); c: d0 at 110 or d1 at 10 + 15 = 25 -> d1, 25-125; d: d0 at
     * 125 + 15 = 140, d1 at max(125, 110 + 15) = 125 -> d1, 125-135.  No
     * schedule does better: c must wait for a's tensor on the other device
     * and d for one of b, c's. */
    assert_int_equal(p->device[op_index(g, "b")], 0);
    assert_int_equal(p->device[op_index(g, "c")], 1);
    assert_int_equal(p->device[op_index(g, "d")], 1);
    assert_close(r.start_us[op_index(g, "c")], 25);
    assert_close(r.makespan_us, 135);
    assert_int_equal(r.transfers, 2);
    assert_null(replay_violation(g, p, &r));
    place_sim_result_clear(&r);
    place_plan_free(p);

    /* m-TOPO keeps everything on d0: 10 + 100 + 100 + 10 */
    p = place_ok(g, place_algo_topo, &r);
    assert_close(r.makespan_us, 220);
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_etf_reuses_sent_tensor(void **state)
{
    (void)state;
    /* a feeds b, c, e; b and c are long and parallel; e reads a and c on
     * d1, where a's tensor already is: no second transfer of a. */
    place_graph *g = parse_ok("{'ops':[{'name':'a','compute_us':10,'output_bytes':[1000]},{'name':'b','compute_us':100},"
                              "{'name':'c','compute_us':100,'output_bytes':[10]},{'name':'e','compute_us':10}],"
                              "'edges':[{'src':'a','dst':'b'},{'src':'a','dst':'c'},{'src':'a','dst':'e'},{'src':'c','dst':'e'}],"
                              "'devices':[{'name':'d0','memory_bytes':100000},{'name':'d1','memory_bytes':100000}],"
                              "'comm':{'latency_us':5,'bytes_per_us':100}}");
    place_sim_result r;
    place_plan *p = place_ok(g, place_algo_etf, &r);
    /* a d0 0-10, b d0 10-110, c d1 25-125 (a arrives at 25), e d1 125-135 */
    assert_int_equal(p->device[op_index(g, "e")], 1);
    assert_int_equal(r.transfers, 1);
    assert_close(r.makespan_us, 135);
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_etf_heterogeneous_speed(void **state)
{
    (void)state;
    /* two independent 100 us ops; d1 is 4x faster.  a starts at 0 anywhere
     * and finishes first on d1 (25); b starts first on d0 (0) but finishes
     * first on d1 (50): on devices of different speeds the chosen op goes
     * where it finishes first. */
    place_graph *g = parse_ok("{'ops':[{'name':'a','compute_us':100},{'name':'b','compute_us':100}],"
                              "'devices':[{'name':'slow','memory_bytes':1000},{'name':'fast','memory_bytes':1000,'speed':4}]}");
    place_sim_result r;
    place_plan *p = place_ok(g, place_algo_etf, &r);
    assert_int_equal(p->device[0], 1);
    assert_int_equal(p->device[1], 1);
    assert_close(r.makespan_us, 50);
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_etf_uses_link_matrix(void **state)
{
    (void)state;
    /* a on d0 feeds b and c (100 us each); d0 -> d1 costs 1 us, d0 -> d2
     * 50 us.  b d0 10-110; c goes to d1 (arrives 11) rather than d2 (60). */
    place_graph *g = parse_ok("{'ops':[{'name':'a','compute_us':10},{'name':'b','compute_us':100},{'name':'c','compute_us':100}],"
                              "'edges':[{'src':'a','dst':'b','bytes':0},{'src':'a','dst':'c','bytes':0}],"
                              "'devices':[{'name':'d0','memory_bytes':10},{'name':'d1','memory_bytes':10},"
                              "{'name':'d2','memory_bytes':10}],"
                              "'comm':{'latency_us':[[0,1,50],[1,0,50],[50,50,0]],'bytes_per_us':1000}}");
    place_sim_result r;
    place_plan *p = place_ok(g, place_algo_etf, &r);
    assert_int_equal(p->device[2], 1);
    assert_close(r.makespan_us, 111);
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_etf_respects_memory(void **state)
{
    (void)state;
    /* 8 parallel 100-byte ops after a source; devices of 250 bytes hold two
     * each (ops' own memory, conservatively all live at once). */
    place_graph *g =
        parse_ok("{'ops':[{'name':'s','compute_us':1},{'name':'o1','compute_us':50,'persistent_bytes':100},"
                 "{'name':'o2','compute_us':50,'persistent_bytes':100},{'name':'o3','compute_us':50,'persistent_bytes':100},"
                 "{'name':'o4','compute_us':50,'persistent_bytes':100},{'name':'o5','compute_us':50,'persistent_bytes':100},"
                 "{'name':'o6','compute_us':50,'persistent_bytes':100},{'name':'o7','compute_us':50,'persistent_bytes':100},"
                 "{'name':'o8','compute_us':50,'persistent_bytes':100}],"
                 "'edges':[{'src':'s','dst':'o1','bytes':0},{'src':'s','dst':'o2','bytes':0},{'src':'s','dst':'o3','bytes':0},"
                 "{'src':'s','dst':'o4','bytes':0},{'src':'s','dst':'o5','bytes':0},{'src':'s','dst':'o6','bytes':0},"
                 "{'src':'s','dst':'o7','bytes':0},{'src':'s','dst':'o8','bytes':0}],"
                 "'devices':[{'name':'d0','memory_bytes':250},{'name':'d1','memory_bytes':250},"
                 "{'name':'d2','memory_bytes':250},{'name':'d3','memory_bytes':250}],"
                 "'comm':{'latency_us':1,'bytes_per_us':1000}}");
    place_sim_result r;
    place_plan *p = place_ok(g, place_algo_etf, &r);
    for (int d = 0; d < 4; d++) {
        assert_int_equal(r.ops[d], d == 0 ? 3 : 2);
        assert_true(r.peak_bytes[d] <= 250);
    }
    assert_null(replay_violation(g, p, &r));
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_etf_unsticks_by_pinning(void **state)
{
    (void)state;
    /* x1 and x2 run in parallel, one per device (40 bytes each); then big
     * (90 bytes) fits on neither 100-byte device: the greedy pass is stuck
     * where Baechi stops with "cannot place op".  The retry holds room for
     * big on one device, so x1 and x2 share the other. */
    place_graph *g =
        parse_ok("{'ops':[{'name':'s','compute_us':1},{'name':'x1','compute_us':10,'persistent_bytes':40},"
                 "{'name':'x2','compute_us':10,'persistent_bytes':40},{'name':'big','compute_us':1,'persistent_bytes':90}],"
                 "'edges':[{'src':'s','dst':'x1','bytes':0},{'src':'s','dst':'x2','bytes':0},"
                 "{'src':'x1','dst':'big','bytes':0},{'src':'x2','dst':'big','bytes':0}],"
                 "'devices':[{'name':'d0','memory_bytes':100},{'name':'d1','memory_bytes':100}],"
                 "'comm':{'latency_us':1,'bytes_per_us':1000}}");
    place_sim_result r;
    place_plan *p = place_ok(g, place_algo_etf, &r);
    int big = op_index(g, "big");
    assert_int_equal(p->device[op_index(g, "x1")], p->device[op_index(g, "x2")]);
    assert_int_not_equal(p->device[big], p->device[op_index(g, "x1")]);
    assert_null(replay_violation(g, p, &r));
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

static void test_etf_infeasible_names_op(void **state)
{
    (void)state;
    place_graph *g =
        parse_ok("{'ops':[{'name':'a','compute_us':1,'persistent_bytes':10},{'name':'huge','compute_us':1,'persistent_bytes':500}],"
                 "'edges':[{'src':'a','dst':'huge','bytes':0}],"
                 "'devices':[{'name':'d0','memory_bytes':300},{'name':'d1','memory_bytes':200}]}");
    place_plan *p = place_plan_new(g->n_ops);
    char reason[512];
    assert_int_equal(place_algo_etf(g, p, reason, sizeof reason), -1);
    assert_string_equal(reason,
                        "op 'huge' needs 500 bytes but the largest free device memory is 290 bytes on 'd0' (missing 210 bytes)");
    place_plan_free(p);
    place_graph_free(g);
}

static void test_etf_places_groups_whole(void **state)
{
    (void)state;
    /* b and d share weights: when b is placed, d goes with it, even though
     * d would start earlier elsewhere. */
    place_graph *g =
        parse_ok("{'ops':[{'name':'a','compute_us':10},{'name':'b','compute_us':10,'group':'w'},"
                 "{'name':'c','compute_us':10},{'name':'d','compute_us':10,'group':'w'}],"
                 "'edges':[{'src':'a','dst':'b','bytes':0},{'src':'a','dst':'c','bytes':0},{'src':'c','dst':'d','bytes':0}],"
                 "'devices':[{'name':'d0','memory_bytes':100},{'name':'d1','memory_bytes':100}],"
                 "'comm':{'latency_us':1,'bytes_per_us':1000}}");
    place_sim_result r;
    place_plan *p = place_ok(g, place_algo_etf, &r);
    assert_int_equal(p->device[op_index(g, "b")], p->device[op_index(g, "d")]);
    assert_null(replay_violation(g, p, &r));
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);
}

/* ---- fusion and co-placement ---- */

#include "workers/place/view.h"

/* Group g: a -> b -> c.  a and b produce 100 bytes each, read only by the
 * next op; c's 10 bytes leave the group.  Running a, b, c in a row holds
 * a's and b's outputs at once while b runs: the internal peak is 200.
 * Baechi's fused op would be charged c's output + the largest temporary =
 * 10 bytes. */
#define FUSE_CHAIN                                                                                                                 \
    "{'ops':[{'name':'in','compute_us':1,'output_bytes':[1]},"                                                                     \
    "{'name':'a','compute_us':5,'output_bytes':[100],'persistent_bytes':3,'group':'g'},"                                           \
    "{'name':'b','compute_us':5,'output_bytes':[100],'temp_bytes':7,'group':'g'},"                                                 \
    "{'name':'c','compute_us':5,'output_bytes':[10],'group':'g'},{'name':'out','compute_us':1}],"                                  \
    "'edges':[{'src':'in','dst':'a'},{'src':'a','dst':'b'},{'src':'b','dst':'c'},{'src':'c','dst':'out'}],"                        \
    "'devices':[{'name':'small','memory_bytes':150},{'name':'big','memory_bytes':400}],'comm':{'latency_us':1}}"

static void test_fusion_counts_internal_peak(void **state)
{
    (void)state;
    place_graph *g = parse_ok(FUSE_CHAIN);
    int *off, *members, *of;
    char msg[256];
    place_graph *f = place_fuse(g, &off, &members, &of, msg, sizeof msg);
    assert_non_null(f);
    assert_int_equal(f->n_ops, 3); /* in, a+b+c, out */
    int k = of[op_index(g, "a")];
    assert_int_equal(of[op_index(g, "b")], k);
    assert_int_equal(of[op_index(g, "c")], k);
    assert_int_equal(off[k + 1] - off[k], 3);
    const place_op *o = &f->ops[k];
    assert_close(o->compute_us, 15);
    assert_int_equal(o->persistent_bytes, 3);
    assert_int_equal(o->output_bytes, 10); /* only c's output leaves */
    /* the peak, at b: a's 100 + b's 100 + b's temp 7 = 207; charged as
     * output 10 + temp 197 */
    assert_int_equal(o->temp_bytes, 197);
    assert_int_equal(f->n_edges, 2);
    place_graph_free(f);
    free(off), free(members), free(of);
    place_graph_free(g);

    /* Through the solver: the fused op must go to 'big' (210 bytes with its
     * weights do not fit the 150 of 'small'), and the ops run one by one
     * within memory too. */
    json_t *spec = J("{'graph':" FUSE_CHAIN ",'fuse':true,'algorithms':['m-etf','m-sct','m-topo']}");
    char err[512];
    json_t *r = place_solve(spec, err, sizeof err);
    if (!r) fail_msg("%s", err);
    json_t *placement = json_object_get(json_object_get(r, "plan"), "placement");
    assert_string_equal(json_string_value(json_object_get(placement, "b")), "big");
    assert_int_equal(json_object_size(placement), 5); /* every original op */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "metrics"), "fused_ops")), 2);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(r, "candidates"), i, c)
    {
        assert_true(json_is_true(json_object_get(c, "feasible")));
        assert_non_null(json_object_get(c, "unfused_makespan_us"));
        json_t *peaks = json_object_get(c, "peak_bytes");
        assert_true(json_integer_value(json_array_get(peaks, 0)) <= 150);
        assert_true(json_integer_value(json_array_get(peaks, 1)) <= 400);
    }
    json_decref(r);
    json_decref(spec);
}

static void test_fusion_keeps_graph_acyclic(void **state)
{
    (void)state;
    /* u -> v and u -> x -> v with u, v in group g and x outside: merging u
     * and v would make u+v -> x -> u+v a cycle.  u has two consumers and v
     * two producers, so the rule refuses. */
    place_graph *g = parse_ok("{'ops':[{'name':'u','compute_us':1,'group':'g'},{'name':'x','compute_us':1},"
                              "{'name':'v','compute_us':1,'group':'g'}],"
                              "'edges':[{'src':'u','dst':'v'},{'src':'u','dst':'x'},{'src':'x','dst':'v'}],"
                              "'devices':[{'name':'d','memory_bytes':100}]}");
    int *off, *members, *of;
    char msg[256];
    place_graph *f = place_fuse(g, &off, &members, &of, msg, sizeof msg);
    assert_non_null(f);
    assert_int_equal(f->n_ops, 3);
    place_graph_free(f);
    free(off), free(members), free(of);
    place_graph_free(g);

    /* a diamond inside one group fuses whole: every merge has a side with
     * one neighbour */
    g = parse_ok("{'ops':[{'name':'u','compute_us':1,'group':'g'},{'name':'v1','compute_us':1,'group':'g'},"
                 "{'name':'v2','compute_us':1,'group':'g'},{'name':'w','compute_us':1,'group':'g'}],"
                 "'edges':[{'src':'u','dst':'v1'},{'src':'u','dst':'v2'},{'src':'v1','dst':'w'},{'src':'v2','dst':'w'}],"
                 "'devices':[{'name':'d','memory_bytes':100}]}");
    f = place_fuse(g, &off, &members, &of, msg, sizeof msg);
    assert_non_null(f);
    assert_int_equal(f->n_ops, 1);
    assert_int_equal(f->n_edges, 0);
    place_graph_free(f);
    free(off), free(members), free(of);
    place_graph_free(g);
}

static void test_coplace_groups_single_consumers(void **state)
{
    (void)state;
    /* a -> b -> c, and s feeds both a and d: a and b have one consumer each
     * and join c's group; s has two and stays alone; 'huge' would make a
     * group bigger than a quarter of the largest device and stays alone. */
    place_graph *g = parse_ok("{'ops':[{'name':'s','compute_us':1},{'name':'a','compute_us':1},{'name':'b','compute_us':1},"
                              "{'name':'c','compute_us':1},{'name':'d','compute_us':1},"
                              "{'name':'huge','compute_us':1,'persistent_bytes':300},{'name':'e','compute_us':1}],"
                              "'edges':[{'src':'s','dst':'a'},{'src':'s','dst':'d'},{'src':'a','dst':'b'},{'src':'b','dst':'c'},"
                              "{'src':'huge','dst':'e'}],"
                              "'devices':[{'name':'d0','memory_bytes':1000}]}");
    int joined;
    char msg[256];
    place_graph *c = place_coplace(g, &joined, msg, sizeof msg);
    assert_non_null(c);
    int ga = c->ops[op_index(g, "a")].group;
    assert_true(ga >= 0);
    assert_int_equal(c->ops[op_index(g, "b")].group, ga);
    assert_int_equal(c->ops[op_index(g, "c")].group, ga);
    assert_string_equal(c->group_names[ga], "co:c");
    assert_int_equal(c->ops[op_index(g, "s")].group, -1);
    assert_int_equal(c->ops[op_index(g, "d")].group, -1);
    assert_int_equal(c->ops[op_index(g, "huge")].group, -1);
    assert_int_equal(joined, 3);
    place_graph_free(c);
    place_graph_free(g);
}

/* ---- schedule, lower bound, solver ---- */

static void test_schedule_and_lower_bound(void **state)
{
    (void)state;
    json_t *spec = J("{'graph':" FORK_JOIN ",'algorithms':['m-etf']}");
    char err[512];
    json_t *r = place_solve(spec, err, sizeof err);
    if (!r) fail_msg("%s", err);
    /* critical path at the fastest speed: a + b + d = 120 us; total work
     * 220 over 2 devices = 110: the bound is 120, m-ETF's 135 is 1.125x */
    assert_close(json_real_value(json_object_get(r, "lower_bound_us")), 120);
    json_t *c0 = json_array_get(json_object_get(r, "candidates"), 0);
    assert_close(json_real_value(json_object_get(c0, "makespan_over_lower_bound")), 1.125);
    json_t *plan = json_object_get(r, "plan");
    assert_int_equal(json_array_size(json_object_get(plan, "order")), 4);
    json_t *s = json_object_get(plan, "schedule");
    assert_non_null(s);
    assert_string_equal(json_string_value(json_array_get(json_object_get(s, "op_names"), 2)), "c");
    json_t *ops = json_object_get(s, "ops");
    assert_int_equal(json_array_size(ops), 4);
    /* c: [2, device 1, 25, 125] */
    json_t *oc = json_array_get(ops, 2);
    assert_int_equal(json_integer_value(json_array_get(oc, 0)), 2);
    assert_int_equal(json_integer_value(json_array_get(oc, 1)), 1);
    assert_close(json_real_value(json_array_get(oc, 2)), 25);
    assert_close(json_real_value(json_array_get(oc, 3)), 125);
    /* a -> d1 at 10-25, then b -> d1 at 110-125, both 1000 bytes */
    json_t *xs = json_object_get(s, "transfers");
    assert_int_equal(json_array_size(xs), 2);
    json_t *x0 = json_array_get(xs, 0), *x1 = json_array_get(xs, 1);
    assert_int_equal(json_integer_value(json_array_get(x0, 0)), 0);
    assert_int_equal(json_integer_value(json_array_get(x0, 1)), 1);
    assert_close(json_real_value(json_array_get(x0, 2)), 10);
    assert_close(json_real_value(json_array_get(x0, 3)), 25);
    assert_int_equal(json_integer_value(json_array_get(x0, 4)), 1000);
    assert_int_equal(json_integer_value(json_array_get(x0, 5)), 0);
    assert_int_equal(json_integer_value(json_array_get(x1, 5)), 1);
    json_t *mem = json_object_get(s, "memory");
    assert_int_equal(json_array_size(mem), 2);
    /* d1: 0 at t=0; a's copy 1000 at 10; c's output 1000 at 25; b's copy
     * 1000 at 110; d runs at 125 and frees the copies and c's output */
    json_t *m1 = json_array_get(mem, 1);
    assert_close(json_real_value(json_array_get(json_array_get(m1, 0), 0)), 0);
    int64_t top = 0;
    size_t i;
    json_t *pt;
    json_array_foreach(m1, i, pt)
    {
        if (json_integer_value(json_array_get(pt, 1)) > top) top = json_integer_value(json_array_get(pt, 1));
    }
    assert_int_equal(top, 3000);
    json_decref(r);
    json_decref(spec);
}

static void test_schedule_memory_is_thinned(void **state)
{
    (void)state;
    /* a chain of 3000 ops on one device changes memory 6000 times: the
     * schedule keeps at most 2000 points, the peak among them */
    json_t *ops = json_array(), *edges = json_array();
    for (int i = 0; i < 3000; i++) {
        char name[16], prev[16];
        snprintf(name, sizeof name, "o%d", i);
        json_array_append_new(ops, json_pack("{s:s,s:f,s:[i],s:i}", "name", name, "compute_us", 1.0, "output_bytes", 10 + i % 7,
                                             "temp_bytes", i == 1234 ? 100000 : 5));
        snprintf(prev, sizeof prev, "o%d", i - 1);
        if (i) json_array_append_new(edges, json_pack("{s:s,s:s}", "src", prev, "dst", name));
    }
    json_t *spec = json_pack("{s:{s:o,s:o,s:[{s:s,s:i}]},s:[s],s:b}", "graph", "ops", ops, "edges", edges, "devices", "name", "d",
                             "memory_bytes", 1000000, "algorithms", "single", "fuse", 0); /* op by op: not fused */
    char err[512];
    json_t *r = place_solve(spec, err, sizeof err);
    if (!r) fail_msg("%s", err);
    json_t *plan = json_object_get(r, "plan");
    json_t *m0 = json_array_get(json_object_get(json_object_get(plan, "schedule"), "memory"), 0);
    assert_true(json_array_size(m0) <= 2000);
    assert_true(json_array_size(m0) > 1000);
    int64_t top = 0;
    size_t i;
    json_t *pt;
    json_array_foreach(m0, i, pt)
    {
        if (json_integer_value(json_array_get(pt, 1)) > top) top = json_integer_value(json_array_get(pt, 1));
    }
    json_t *dev0 = json_array_get(json_object_get(plan, "devices"), 0);
    assert_int_equal(top, json_integer_value(json_object_get(dev0, "peak_bytes")));
    json_decref(r);
    json_decref(spec);
}

static void test_infeasible_error_names_op(void **state)
{
    (void)state;
    json_t *spec =
        J("{'graph':{'ops':[{'name':'emb','compute_us':1,'persistent_bytes':900},"
          "{'name':'lstm','compute_us':1,'persistent_bytes':700}],'edges':[{'src':'emb','dst':'lstm','bytes':0}],"
          "'devices':[{'name':'g0','memory_bytes':1000},{'name':'g1','memory_bytes':600}]},'algorithms':['m-sct','m-etf']}");
    char err[512];
    assert_null(place_solve(spec, err, sizeof err));
    assert_string_equal(err,
                        "no feasible placement; m-sct: op 'lstm' needs 700 bytes but the largest free device memory is 600 bytes "
                        "on 'g1' (missing 100 bytes); still stuck with the memory reserve and 1 unit pinned with their inputs");
    json_decref(spec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_etf_parallelises_fork_join),
        cmocka_unit_test(test_etf_reuses_sent_tensor),
        cmocka_unit_test(test_etf_heterogeneous_speed),
        cmocka_unit_test(test_etf_uses_link_matrix),
        cmocka_unit_test(test_etf_respects_memory),
        cmocka_unit_test(test_etf_unsticks_by_pinning),
        cmocka_unit_test(test_etf_infeasible_names_op),
        cmocka_unit_test(test_etf_places_groups_whole),
        cmocka_unit_test(test_fusion_counts_internal_peak),
        cmocka_unit_test(test_fusion_keeps_graph_acyclic),
        cmocka_unit_test(test_coplace_groups_single_consumers),
        cmocka_unit_test(test_schedule_and_lower_bound),
        cmocka_unit_test(test_schedule_memory_is_thinned),
        cmocka_unit_test(test_infeasible_error_names_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
