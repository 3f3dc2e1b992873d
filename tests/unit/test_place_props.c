/* test_place_props.c - properties of the list schedulers on random DAGs
 * with fixed seeds: the heap m-ETF is exactly the rescanning m-ETF; every
 * plan is valid in the simulator and within memory; m-ETF against m-TOPO.
 *
 * m-ETF is not always at least as fast as m-TOPO, even on identical devices
 * with plenty of memory (test_etf_can_lose_to_topo shows why: it starts a
 * short branch remotely to gain a little, then waits twice as long for the
 * round trip).  What holds and is asserted here:
 *  - on out-forests (every op has at most one input), identical devices and
 *    memory that binds nowhere, m-ETF <= m-TOPO always.  Proof: each op can
 *    start on its input's device no later than the latest end F of the ops
 *    placed so far (its input and that device's last op end by F), and
 *    m-ETF takes the earliest start of all, so every op ends by F + its
 *    time and the makespan is at most the total work, which is m-TOPO's
 *    makespan (it keeps everything on device 0, no transfers, no idling);
 *  - on general DAGs, identical devices, plenty of memory: m-ETF <= m-TOPO
 *    on at least 98% of the seeds and on average below 0.7x (observed: all
 *    200, mean 0.49; not a theorem, so not asserted per DAG);
 *  - the solver's best plan is never slower than m-TOPO's: it always weighs
 *    m-TOPO and the single-device plan and returns the fastest feasible;
 *  - at tight memory (1,000 random DAGs), m-ETF and m-SCT return a plan of
 *    their own, found by the plain pass or by their ladder (the memory
 *    reserve, then pinned units; the note says which), or fail with a
 *    reason that names the op, the missing bytes and the rules tried; never
 *    another algorithm's plan.  How often they fail where m-TOPO places the
 *    graph is counted and bounded. */
#include "test_place_common.c"
#include "workers/place/etf.c"
#include "workers/place/levels.h"
#include "workers/place/matching.h"

/* ---- the reference: METHODS' m-ETF by rescanning, no heaps, no caches ---- */

static int ref_step(etf *s)
{
    const place_graph *g = s->g;
    int best = -1, best_dev = -1;
    double best_start = 0, best_fin = 0;
    for (int t = 0; t < g->n_ops; t++) {
        int op = g->topo[t];
        if (s->done[op] || s->pending[op] > 0) continue;
        for (int d = 0; d < g->n_devices; d++) {
            if (!allowed(s, op, d)) continue;
            double st = start_on(s, op, d), fin = st + place_op_time(g, op, d);
            int better = best < 0 || st < best_start ||
                         (st == best_start && (g->topo_pos[op] < g->topo_pos[best] || (op == best && fin < best_fin)));
            if (!better || !fits(s, op, d)) continue;
            best = op, best_dev = d, best_start = st, best_fin = fin;
        }
    }
    if (best < 0 && s->reserve && !s->relax) { /* nothing meets the reserve: one step without it */
        s->relax = 1;
        return RUN_OK;
    }
    if (best < 0) return RUN_STUCK;
    s->relax = 0;
    if (s->hetero) best_dev = fastest_finish(s, best, best_dev, &best_start);
    return commit(s, best, best_dev) < 0 ? RUN_OOM : RUN_OK;
}

static int ref_etf(const place_graph *g, place_plan *plan)
{
    static const place_etf_opts none;
    static const pass plain = {NULL, 1, 1}; /* m-ETF's first pass: with the memory reserve */
    etf s;
    int rc = etf_init(&s, g, &none, &plain, plan) < 0 ? RUN_OOM : RUN_OK;
    while (rc == RUN_OK && s.n_done < g->n_ops)
        rc = ref_step(&s);
    etf_free(&s);
    return rc;
}

static int same_plan(const place_plan *a, const place_plan *b)
{
    for (int i = 0; i < a->n_ops; i++)
        if (a->order[i] != b->order[i] || a->device[a->order[i]] != b->device[b->order[i]]) return 0;
    return 1;
}

static void test_heap_etf_is_rescan_etf(void **state)
{
    (void)state;
    int compared = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        dag_shape sh = {
            5, 60, 2 + (int)(seed % 3), (int)(seed % 4 == 1), (int)(seed % 5 == 2), (int)(seed % 6 == 3), seed % 2 ? 0 : 0.7, 0};
        json_t *j = random_dag(seed, &sh);
        place_graph *g = parse_json(j);
        place_plan *a = place_plan_new(g->n_ops), *b = place_plan_new(g->n_ops);
        char reason[512];
        if (ref_etf(g, b) == RUN_OK) {
            if (place_algo_etf(g, a, reason, sizeof reason) != 0) fail_msg("seed %d: %s", (int)seed, reason);
            if (!same_plan(a, b)) fail_msg("seed %d: heap m-ETF differs from the rescan", (int)seed);
            assert_string_equal(a->note, "");
            compared++;
        }
        place_plan_free(a), place_plan_free(b);
        place_graph_free(g);
        json_decref(j);
    }
    assert_true(compared > 200);
}

static void test_sct_cache_changes_nothing(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 120; seed++) {
        dag_shape sh = {5, 80, 2 + (int)(seed % 3), (int)(seed % 4 == 1), (int)(seed % 5 == 2), 0, 0, 0};
        json_t *j = random_dag(seed, &sh);
        place_graph *g = parse_json(j);
        place_levels lv = {0};
        int *child = malloc((size_t)g->n_ops * sizeof *child), *parent = malloc((size_t)g->n_ops * sizeof *parent);
        assert_int_equal(place_levels_compute(g, &lv), 0);
        assert_int_equal(place_favourites(g, &lv, child, parent), 0);
        place_etf_opts o = {child, parent, lv.bottom, 0}, nc = {child, parent, lv.bottom, 1};
        place_plan *a = place_plan_new(g->n_ops), *b = place_plan_new(g->n_ops);
        char reason[512];
        assert_int_equal(place_etf_schedule(g, &o, a, reason, sizeof reason), 0);
        assert_int_equal(place_etf_schedule(g, &nc, b, reason, sizeof reason), 0);
        if (!same_plan(a, b)) fail_msg("seed %d: m-SCT's candidate cache changed the plan", (int)seed);
        for (int i = 0; i < g->n_ops; i++) /* favourites: at most one child and one parent each */
            if (child[i] >= 0) assert_int_equal(parent[child[i]], i);
        place_plan_free(a), place_plan_free(b);
        place_levels_clear(&lv);
        free(child), free(parent);
        place_graph_free(g);
        json_decref(j);
    }
}

/* ---- every plan valid ---- */

typedef struct outcome {
    int ok;
    double makespan;
} outcome;

static outcome check_algo(const place_graph *g, place_algo_fn f, const char *name, int seed)
{
    place_plan *p = place_plan_new(g->n_ops);
    char reason[512];
    outcome out = {0, 0};
    if (f(g, p, reason, sizeof reason) == 0) {
        place_sim_result r;
        assert_int_equal(place_simulate(g, p, &r), 0);
        if (!r.feasible) fail_msg("seed %d %s: %s", seed, name, r.reason);
        const char *v = replay_violation(g, p, &r);
        if (v) fail_msg("seed %d %s: %s", seed, name, v);
        if (r.makespan_us < place_lower_bound_us(g) - 1e-6) fail_msg("seed %d %s: below the lower bound", seed, name);
        out = (outcome){1, r.makespan_us};
        place_sim_result_clear(&r);
    } else if (!strstr(reason, "missing") && !strstr(reason, "fits on no device")) {
        fail_msg("seed %d %s: unclear failure: %s", seed, name, reason);
    }
    place_plan_free(p);
    return out;
}

static void test_every_plan_valid(void **state)
{
    (void)state;
    static const dag_shape shapes[] = {
        {5, 80, 3, 0, 0, 0, 0, 0},   /* identical devices, plenty of memory */
        {5, 80, 3, 0, 0, 0, 0.7, 0}, /* tight memory */
        {5, 80, 3, 0, 0, 1, 0.7, 0}, /* tight memory and colocation groups */
        {5, 80, 3, 1, 1, 0, 0, 0},   /* different speeds, per-link matrices */
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int topo_ok = 0, etf_ok = 0, sct_ok = 0;
        for (uint64_t seed = 1; seed <= 200; seed++) {
            dag_shape sh = shapes[k];
            sh.devices = 2 + (int)(seed % 3);
            json_t *j = random_dag(seed, &sh);
            place_graph *g = parse_json(j);
            outcome t = check_algo(g, place_algo_topo, "m-topo", (int)seed);
            outcome e = check_algo(g, place_algo_etf, "m-etf", (int)seed);
            outcome s = check_algo(g, place_algo_sct, "m-sct", (int)seed);
            check_algo(g, place_algo_single, "single", (int)seed);
            topo_ok += t.ok, etf_ok += e.ok, sct_ok += s.ok;
            place_graph_free(g);
            json_decref(j);
        }
        print_message("shape %zu: feasible m-topo %d, m-etf %d, m-sct %d of 200\n", k, topo_ok, etf_ok, sct_ok);
    }
}

/* ---- tight memory: a plan of their own, or a stated reason ---- */

typedef struct ladder_count {
    int plain, ladder, failed, failed_topo_ok;
} ladder_count;

/* One list scheduler on g: its own plan, valid, or a reason that proves
 * none of its rules placed the graph. */
static void own_plan_or_reason(const place_graph *g, place_algo_fn f, const char *name, int seed, int topo_ok, ladder_count *c)
{
    place_plan *p = place_plan_new(g->n_ops);
    char reason[512];
    if (f(g, p, reason, sizeof reason) == 0) {
        place_sim_result r;
        assert_int_equal(place_simulate(g, p, &r), 0);
        if (!r.feasible) fail_msg("seed %d %s: %s", seed, name, r.reason);
        const char *v = replay_violation(g, p, &r);
        if (v) fail_msg("seed %d %s: %s", seed, name, v);
        place_sim_result_clear(&r);
        if (p->note[0] && (strncmp(p->note, "greedy pass stuck (", 19) != 0 || !strstr(p->note, "); placed after pinning ")))
            fail_msg("seed %d %s: note '%s'", seed, name, p->note);
        if (strstr(p->note, "m-TOPO") || strstr(p->note, "fell back")) fail_msg("seed %d %s: a fallback: %s", seed, name, p->note);
        p->note[0] ? c->ladder++ : c->plain++;
    } else {
        if (!strstr(reason, "missing") && !strstr(reason, "fits on no device"))
            fail_msg("seed %d %s: unclear failure: %s", seed, name, reason);
        if (!strstr(reason, "; still stuck with the memory reserve and ")) {
            /* only when the op's unit alone is larger than every device */
            char op[64] = "";
            if (sscanf(reason, "op '%63[^']'", op) != 1 || !fits_no_device(g, op_index(g, op)))
                fail_msg("seed %d %s: fails without trying its rules: %s", seed, name, reason);
        }
        c->failed++;
        c->failed_topo_ok += topo_ok;
    }
    place_plan_free(p);
}

static void test_tight_memory_own_plan_or_reason(void **state)
{
    (void)state;
    ladder_count etf = {0}, sct = {0};
    int topo_ok = 0;
    for (uint64_t seed = 1; seed <= 1000; seed++) {
        dag_shape sh = {5,
                        80,
                        2 + (int)(seed % 3),
                        (int)(seed % 5 == 1),
                        (int)(seed % 7 == 2),
                        (int)(seed % 4 == 0),
                        0.75 + 0.05 * (double)(seed % 6),
                        0};
        json_t *j = random_dag(seed, &sh);
        place_graph *g = parse_json(j);
        place_plan *t = place_plan_new(g->n_ops);
        char reason[512];
        int tok = place_algo_topo(g, t, reason, sizeof reason) == 0;
        topo_ok += tok;
        own_plan_or_reason(g, place_algo_etf, "m-etf", (int)seed, tok, &etf);
        own_plan_or_reason(g, place_algo_sct, "m-sct", (int)seed, tok, &sct);
        place_plan_free(t);
        place_graph_free(g);
        json_decref(j);
    }
    print_message("1000 DAGs at tight memory: m-topo placed %d; m-etf plain %d, ladder %d, failed %d (m-topo placed %d); "
                  "m-sct plain %d, ladder %d, failed %d (m-topo placed %d)\n",
                  topo_ok, etf.plain, etf.ladder, etf.failed, etf.failed_topo_ok, sct.plain, sct.ladder, sct.failed,
                  sct.failed_topo_ok);
    /* measured: 44 and 62; m-TOPO's plan stays the solver's own candidate there */
    assert_true(etf.failed_topo_ok <= 50);
    assert_true(sct.failed_topo_ok <= 70);
}

/* ---- m-ETF against m-TOPO ---- */

static void test_etf_vs_topo_out_forests(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        dag_shape sh = {5, 80, 2 + (int)(seed % 3), 0, 0, 0, 0, 1};
        json_t *j = random_dag(seed, &sh);
        place_graph *g = parse_json(j);
        outcome t = check_algo(g, place_algo_topo, "m-topo", (int)seed);
        outcome e = check_algo(g, place_algo_etf, "m-etf", (int)seed);
        if (e.makespan > t.makespan + 1e-6)
            fail_msg("seed %d: m-ETF %.3f > m-TOPO %.3f on an out-forest", (int)seed, e.makespan, t.makespan);
        place_graph_free(g);
        json_decref(j);
    }
}

static void test_etf_vs_topo_general(void **state)
{
    (void)state;
    int not_worse = 0;
    double sum = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        dag_shape sh = {5, 80, 2 + (int)(seed % 3), 0, 0, 0, 0, 0};
        json_t *j = random_dag(seed, &sh);
        place_graph *g = parse_json(j);
        outcome t = check_algo(g, place_algo_topo, "m-topo", (int)seed);
        outcome e = check_algo(g, place_algo_etf, "m-etf", (int)seed);
        not_worse += e.makespan <= t.makespan + 1e-6;
        sum += e.makespan / t.makespan;
        place_graph_free(g);
        json_decref(j);
    }
    print_message("m-ETF <= m-TOPO on %d of 200, mean ratio %.3f\n", not_worse, sum / 200);
    assert_true(not_worse >= 196);
    assert_true(sum / 200 < 0.7);
}

static void test_etf_can_lose_to_topo(void **state)
{
    (void)state;
    /* a -> b (10) -> d and a -> c (1) -> d, transfers 8 us, identical
     * devices.  m-ETF: a d0 0-1, b d0 1-11, c starts earlier on d1 (1 + 8
     * = 9 < 11): 9-10; d on d0 waits for c's tensor (10 + 8 = 18) and on d1
     * for b's (11 + 8 = 19): d0 18-19.  m-TOPO, all on d0: 13. */
    place_graph *g =
        parse_ok("{'ops':[{'name':'a','compute_us':1},{'name':'b','compute_us':10},{'name':'c','compute_us':1},"
                 "{'name':'d','compute_us':1}],"
                 "'edges':[{'src':'a','dst':'b','bytes':0},{'src':'a','dst':'c','bytes':0},{'src':'b','dst':'d','bytes':0},"
                 "{'src':'c','dst':'d','bytes':0}],"
                 "'devices':[{'name':'d0','memory_bytes':100},{'name':'d1','memory_bytes':100}],"
                 "'comm':{'latency_us':8}}");
    place_sim_result r;
    place_plan *p = place_ok(g, place_algo_etf, &r);
    assert_close(r.makespan_us, 19);
    place_sim_result_clear(&r);
    place_plan_free(p);
    p = place_ok(g, place_algo_topo, &r);
    assert_close(r.makespan_us, 13);
    place_sim_result_clear(&r);
    place_plan_free(p);
    place_graph_free(g);

    /* the solver returns the faster plan whatever was asked for */
    json_t *spec = J("{'graph':{'ops':[{'name':'a','compute_us':1},{'name':'b','compute_us':10},{'name':'c','compute_us':1},"
                     "{'name':'d','compute_us':1}],'edges':[{'src':'a','dst':'b','bytes':0},{'src':'a','dst':'c','bytes':0},"
                     "{'src':'b','dst':'d','bytes':0},{'src':'c','dst':'d','bytes':0}],"
                     "'devices':[{'name':'d0','memory_bytes':100},{'name':'d1','memory_bytes':100}],'comm':{'latency_us':8}},"
                     "'algorithms':['m-etf']}");
    char err[512];
    json_t *res = place_solve(spec, err, sizeof err);
    if (!res) fail_msg("%s", err);
    assert_close(json_real_value(json_object_get(json_object_get(res, "metrics"), "makespan_us")), 13);
    json_decref(res);
    json_decref(spec);
}

/* ---- fusion and co-placement ---- */

static void test_fused_plans_fit_unfused(void **state)
{
    (void)state;
    /* Fused ops are charged their internal peak, so a plan that fits on the
     * fused graph also fits when its ops run one by one: the solver replays
     * both and would mark a candidate infeasible otherwise. */
    int solved = 0;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        dag_shape sh = {5, 80, 2 + (int)(seed % 3), (int)(seed % 4 == 1), (int)(seed % 5 == 2), 1, seed % 2 ? 0 : 0.8, 0};
        json_t *g = random_dag(seed, &sh);
        json_t *spec =
            json_pack("{s:o,s:[s],s:b,s:b}", "graph", g, "algorithms", "all", "fuse", 1, "coplace", (int)(seed % 3 != 0));
        char err[512];
        json_t *r = place_solve(spec, err, sizeof err);
        if (!r && !strstr(err, "missing") && !strstr(err, "fits on no device")) fail_msg("seed %d: %s", (int)seed, err);
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(r, "candidates"), i, c)
        {
            const char *why = json_string_value(json_object_get(c, "reason"));
            if (why && strstr(why, "unfused"))
                fail_msg("seed %d %s: %s", (int)seed, json_string_value(json_object_get(c, "algorithm")), why);
            if (json_is_true(json_object_get(c, "feasible"))) assert_non_null(json_object_get(c, "unfused_makespan_us"));
        }
        if (r) {
            json_t *placement = json_object_get(json_object_get(r, "plan"), "placement");
            assert_int_equal(json_object_size(placement), json_array_size(json_object_get(g, "ops")));
            solved++;
        }
        json_decref(r);
        json_decref(spec);
    }
    print_message("fused and placed %d of 150\n", solved);
    assert_true(solved > 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap_etf_is_rescan_etf),  cmocka_unit_test(test_sct_cache_changes_nothing),
        cmocka_unit_test(test_every_plan_valid),        cmocka_unit_test(test_tight_memory_own_plan_or_reason),
        cmocka_unit_test(test_etf_vs_topo_out_forests), cmocka_unit_test(test_etf_vs_topo_general),
        cmocka_unit_test(test_etf_can_lose_to_topo),    cmocka_unit_test(test_fused_plans_fit_unfused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
