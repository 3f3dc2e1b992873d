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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_etf_parallelises_fork_join), cmocka_unit_test(test_etf_reuses_sent_tensor),
        cmocka_unit_test(test_etf_heterogeneous_speed),    cmocka_unit_test(test_etf_uses_link_matrix),
        cmocka_unit_test(test_etf_respects_memory),        cmocka_unit_test(test_etf_unsticks_by_pinning),
        cmocka_unit_test(test_etf_infeasible_names_op),    cmocka_unit_test(test_etf_places_groups_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
