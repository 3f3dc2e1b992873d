/* test_place_amp.c - the AMP strategy search: a tiny cluster whose ranking
 * is worked out by hand, stage cuts on GPUs of different speeds, memory that
 * rejects strategies and moves cuts, a per-node-pair bandwidth matrix,
 * field-named errors, AMP's heterogeneous-cluster case study
 * (tests/data/amp/het_cluster.json), and the 128-layer, 16-GPU size the
 * search is meant to handle. */
#include "test_place_common.c"

#include "common/clock.h"
#include "workers/place/amp.h"

/* 1 node x 2 GPUs at 8 Gbit/s (1e6 bytes/ms); two layers of 1 ms forward,
 * 1e6 parameters (2 bytes each) and 1e5-byte activations; batch 4. */
#define TINY                                                                                                                       \
    "{'layers':[{'name':'L0','forward_ms':1,'params':1e6,'activation_bytes':1e5},"                                                 \
    "{'name':'L1','forward_ms':1,'params':1e6,'activation_bytes':1e5}],"                                                           \
    "'cluster':{'nodes':1,'gpus_per_node':2,'intra_bw_gbps':8},'global_batch':4}"

static void test_tiny_cluster_by_hand(void **state)
{
    (void)state;
    /* mp1 dp1 pp2: one layer per stage, S = 3 mbs, cut 2 mbs 1e5 / 1e6 =
     *   0.2 mbs; pipeline (B - 1) 3 mbs + 6 mbs + 0.2 mbs with B = 4 / mbs:
     *   mbs 1: 9 + 6 + 0.2 = 15.2; mbs 2: 18.4; mbs 4: 24.8.
     * mp1 dp2 pp1: S = 6 mbs, B = 2 / mbs: 12; all-reduce 2 (1/2) 2e6 * 2
     *   bytes / 1e6 = 4: 16 (mbs 1 and 2, the larger first).
     * mp2 dp1 pp1: t_fwd = 1/2 + 2 * 2 (1/2) 1e5 / 1e6 = 0.7 per layer,
     *   S = 4.2 mbs, 4.2 mbs B = 16.8 (mbs 1, 2, 4). */
    json_t *j = J(TINY);
    char err[512];
    json_t *r = amp_solve(j, "spec.strategy", err, sizeof err);
    if (!r) fail_msg("%s", err);
    static const struct {
        const char *name;
        double ms;
    } want[] = {{"mp1-dp1-pp2-mbs1", 15.2}, {"mp1-dp2-pp1-mbs2", 16},   {"mp1-dp2-pp1-mbs1", 16},   {"mp2-dp1-pp1-mbs4", 16.8},
                {"mp2-dp1-pp1-mbs2", 16.8}, {"mp2-dp1-pp1-mbs1", 16.8}, {"mp1-dp1-pp2-mbs2", 18.4}, {"mp1-dp1-pp2-mbs4", 24.8}};
    json_t *list = json_object_get(r, "strategies");
    assert_int_equal(json_array_size(list), 8);
    for (size_t i = 0; i < 8; i++) {
        json_t *s = json_array_get(list, i);
        assert_string_equal(json_string_value(json_object_get(s, "name")), want[i].name);
        assert_close(json_real_value(json_object_get(s, "iteration_ms")), want[i].ms);
    }
    json_t *best = json_array_get(list, 0);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(best, "cuts"), 0)), 1);
    assert_int_equal(json_integer_value(json_object_get(best, "micro_batches")), 4);
    assert_string_equal(json_string_value(json_object_get(r, "best")), "mp1-dp1-pp2-mbs1");
    assert_close(json_real_value(json_object_get(json_object_get(r, "metrics"), "iteration_ms")), 15.2);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "metrics"), "evaluated")), 8);
    json_decref(r);
    json_decref(j);
}

static void test_slow_gpu_gets_fewer_layers(void **state)
{
    (void)state;
    /* four equal layers on a fast (1.0) and a slow (0.5) GPU, one stage
     * each: three layers on the fast one (stages 9 and 6 per micro-batch)
     * beat two and two (6 and 12) */
    json_t *j = J("{'layers':[{'name':'a','forward_ms':1},{'name':'b','forward_ms':1},{'name':'c','forward_ms':1},"
                  "{'name':'d','forward_ms':1}],"
                  "'cluster':{'nodes':2,'gpus_per_node':1,'intra_bw_gbps':100,'inter_bw_gbps':100,'gpu_speed':[1,0.5]},"
                  "'global_batch':64,'top_k':100}");
    amp_problem *p = amp_problem_parse(j, "s", NULL, 0, NULL, 0);
    assert_non_null(p);
    amp_strategy *s;
    int evaluated, rejected, n = amp_search(p, &s, &evaluated, &rejected);
    assert_true(n > 0);
    int found = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].pp != 2 || s[i].mbs != 1) continue;
        found = 1;
        assert_int_equal(s[i].first[1], 3);
        assert_close(s[i].stage_ms[0], 9);
        assert_close(s[i].stage_ms[1], 6);
        assert_true(s[i].exact);
    }
    assert_true(found);
    amp_strategies_free(s, n);
    amp_problem_free(p);
    json_decref(j);
}

/* TINY with 1e6 stashed bytes per sample per layer and 19e6 bytes per GPU.
 * Per GPU (16 bytes per parameter, 1F1B keeps min(pp - s, B) micro-batches):
 *   mp1 dp1 pp2: stage 0 16e6 + min(2, 4 / mbs) mbs 1e6: mbs 1 18e6 (fits),
 *                mbs 2 20e6, mbs 4 20e6 (do not);
 *   mp1 dp2 pp1: 32e6 + mbs 2e6: none fits;
 *   mp2 dp1 pp1: (32e6 + mbs 2e6) / 2: mbs 1 17e6, mbs 2 18e6 fit, mbs 4 20e6 not.
 * So 3 of the 8 survive, in the unconstrained order; 5 are rejected. */
#define TINY_MEM(bytes)                                                                                                            \
    "{'layers':[{'name':'L0','forward_ms':1,'params':1e6,'activation_bytes':1e5,'stash_bytes':1e6},"                               \
    "{'name':'L1','forward_ms':1,'params':1e6,'activation_bytes':1e5,'stash_bytes':1e6}],"                                         \
    "'cluster':{'nodes':1,'gpus_per_node':2,'intra_bw_gbps':8,'gpu_memory_bytes':" bytes "},'global_batch':4}"

static void test_memory_rejects_strategies(void **state)
{
    (void)state;
    json_t *j = J(TINY_MEM("19e6"));
    char err[512];
    json_t *r = amp_solve(j, "spec.strategy", err, sizeof err);
    if (!r) fail_msg("%s", err);
    static const struct {
        const char *name;
        double ms, mem0;
    } want[] = {{"mp1-dp1-pp2-mbs1", 15.2, 18e6}, {"mp2-dp1-pp1-mbs2", 16.8, 18e6}, {"mp2-dp1-pp1-mbs1", 16.8, 17e6}};
    json_t *list = json_object_get(r, "strategies");
    assert_int_equal(json_array_size(list), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *s = json_array_get(list, i), *st = json_array_get(json_object_get(s, "stages"), 0);
        assert_string_equal(json_string_value(json_object_get(s, "name")), want[i].name);
        assert_close(json_real_value(json_object_get(s, "iteration_ms")), want[i].ms);
        assert_int_equal(json_integer_value(json_object_get(st, "memory_bytes")), (json_int_t)want[i].mem0);
    }
    json_t *m = json_object_get(r, "metrics");
    assert_int_equal(json_integer_value(json_object_get(m, "evaluated")), 8);
    assert_int_equal(json_integer_value(json_object_get(m, "rejected_memory")), 5);
    json_decref(r);
    json_decref(j);

    /* 16e6 bytes hold no strategy: the error names the memory */
    j = J(TINY_MEM("16e6"));
    assert_null(amp_solve(j, "spec.strategy", err, sizeof err));
    if (!strstr(err, "spec.strategy.cluster.gpu_memory_bytes: no strategy fits: each of the 8 tried")) fail_msg("%s", err);
    json_decref(j);
}

static void test_memory_moves_the_cut(void **state)
{
    (void)state;
    /* the four layers of test_slow_gpu_gets_fewer_layers with 1e6 parameters
     * each (16e6 bytes): the fast GPU holds 40e6, so two layers, not three */
    json_t *j = J("{'layers':[{'name':'a','forward_ms':1,'params':1e6},{'name':'b','forward_ms':1,'params':1e6},"
                  "{'name':'c','forward_ms':1,'params':1e6},{'name':'d','forward_ms':1,'params':1e6}],"
                  "'cluster':{'nodes':2,'gpus_per_node':1,'intra_bw_gbps':100,'inter_bw_gbps':100,'gpu_speed':[1,0.5],"
                  "'gpu_memory_bytes':[40e6,80e6]},'global_batch':64,'top_k':100}");
    amp_problem *p = amp_problem_parse(j, "s", NULL, 0, NULL, 0);
    assert_non_null(p);
    amp_strategy *s;
    int evaluated, rejected, n = amp_search(p, &s, &evaluated, &rejected);
    assert_true(n > 0);
    int found = 0;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < s[i].pp; k++) /* every GPU of a returned strategy holds its stage */
            assert_true(s[i].memory[k] <= p->gpu_memory[k * s[i].mp * s[i].dp]);
        if (s[i].pp != 2 || s[i].mbs != 1) continue;
        found = 1;
        assert_int_equal(s[i].first[1], 2);
        assert_close(s[i].stage_ms[0], 6);
        assert_close(s[i].stage_ms[1], 12);
    }
    assert_true(found);
    /* dp2 (all four layers, 64e6, on each GPU) does not fit the fast one */
    for (int i = 0; i < n; i++)
        assert_int_equal(s[i].dp, 1);
    assert_true(rejected > 0);
    amp_strategies_free(s, n);
    amp_problem_free(p);
    json_decref(j);
}

/* 3 nodes x 1 GPU; links 0<->1 and 0<->2 at 8 Gbit/s (1e6 bytes/ms), 1<->2
 * at 80; three 1 ms layers with 1e6 parameters and 1e6-byte activations,
 * batch 3:
 *   dp3 mbs1: 9 ms + all-reduce 2 (2/3) 3e6 * 2 bytes over the ring's
 *     slowest link (0 -> 1) 1e6 = 8 ms: 17;
 *   pp3 mbs1: (3 - 1) 3 + 9 + cuts 2e6 / 1e6 (0 -> 1) + 2e6 / 1e7 (1 -> 2): 17.2;
 *   pp3 mbs3: 27 + 6 + 0.6 = 33.6. */
static void test_links_per_node_pair(void **state)
{
    (void)state;
    json_t *j = J("{'layers':[{'name':'a','forward_ms':1,'params':1e6,'activation_bytes':1e6},"
                  "{'name':'b','forward_ms':1,'params':1e6,'activation_bytes':1e6},"
                  "{'name':'c','forward_ms':1,'params':1e6,'activation_bytes':1e6}],"
                  "'cluster':{'nodes':3,'gpus_per_node':1,'bandwidth_gbps':[[100,8,8],[8,100,80],[8,80,100]]},"
                  "'global_batch':3}");
    char err[512];
    json_t *r = amp_solve(j, "spec.strategy", err, sizeof err);
    if (!r) fail_msg("%s", err);
    static const struct {
        const char *name;
        double ms;
    } want[] = {{"mp1-dp3-pp1-mbs1", 17}, {"mp1-dp1-pp3-mbs1", 17.2}, {"mp1-dp1-pp3-mbs3", 33.6}};
    json_t *list = json_object_get(r, "strategies");
    assert_int_equal(json_array_size(list), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *s = json_array_get(list, i);
        assert_string_equal(json_string_value(json_object_get(s, "name")), want[i].name);
        assert_close(json_real_value(json_object_get(s, "iteration_ms")), want[i].ms);
    }
    json_decref(r);
    json_decref(j);

    /* a matrix of intra on the diagonal and inter elsewhere is the shorthand */
    json_t *a = J("{'layers':[{'name':'a','forward_ms':1,'params':1e6,'activation_bytes':1e5},"
                  "{'name':'b','forward_ms':2,'params':3e6,'activation_bytes':2e5},"
                  "{'name':'c','forward_ms':1,'params':1e6,'activation_bytes':1e5}],"
                  "'cluster':{'nodes':2,'gpus_per_node':2,'intra_bw_gbps':100,'inter_bw_gbps':10},'global_batch':8,'top_k':100}");
    json_t *b = json_deep_copy(a), *c = json_object_get(b, "cluster");
    json_object_del(c, "intra_bw_gbps");
    json_object_del(c, "inter_bw_gbps");
    json_object_set_new(c, "bandwidth_gbps", J("[[100,10],[10,100]]"));
    json_t *ra = amp_solve(a, "s", err, sizeof err), *rb = amp_solve(b, "s", err, sizeof err);
    assert_non_null(ra);
    assert_non_null(rb);
    json_object_del(json_object_get(ra, "metrics"), "search_ms");
    json_object_del(json_object_get(rb, "metrics"), "search_ms");
    assert_true(json_equal(ra, rb));
    json_decref(ra), json_decref(rb), json_decref(a), json_decref(b);
}

static void test_uniform_partition(void **state)
{
    (void)state;
    /* equal layer counts: two and two on the fast and the slow GPU */
    json_t *j = J("{'layers':[{'name':'a','forward_ms':1},{'name':'b','forward_ms':1},{'name':'c','forward_ms':1},"
                  "{'name':'d','forward_ms':1}],"
                  "'cluster':{'nodes':2,'gpus_per_node':1,'intra_bw_gbps':100,'inter_bw_gbps':100,'gpu_speed':[1,0.5]},"
                  "'global_batch':64,'top_k':100,'partition':'uniform'}");
    amp_problem *p = amp_problem_parse(j, "s", NULL, 0, NULL, 0);
    assert_non_null(p);
    amp_strategy *s;
    int evaluated, rejected, n = amp_search(p, &s, &evaluated, &rejected);
    int found = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].pp != 2 || s[i].mbs != 1) continue;
        found = 1;
        assert_int_equal(s[i].first[1], 2);
        assert_close(s[i].pipeline_ms, 63 * 12 + 18);
    }
    assert_true(found);
    amp_strategies_free(s, n);
    amp_problem_free(p);
    json_decref(j);
}

static json_t *load_case_study(void)
{
    json_error_t e;
    json_t *j = json_load_file(GANTRY_SOURCE_DIR "/tests/data/amp/het_cluster.json", 0, &e);
    if (!j) fail_msg("het_cluster.json: %s", e.text);
    return j;
}

/* AMP's heterogeneous-cluster case study (docs/placement.md): the searched
 * cuts beat the best strategy with equal layer counts, every returned
 * strategy fits, and the ranking's top three are the three AMP's own cost
 * model ranks first (its src/results/het_cluster_results.txt). */
static void test_het_cluster_case_study(void **state)
{
    (void)state;
    json_t *j = load_case_study(), *u = json_deep_copy(j);
    json_object_set_new(u, "partition", json_string("uniform"));
    char err[512];
    json_t *r = amp_solve(j, "s", err, sizeof err), *ru = amp_solve(u, "s", err, sizeof err);
    assert_non_null(r);
    assert_non_null(ru);
    static const char *const amp_top[] = {"mp1-dp4-pp4-mbs1", "mp1-dp2-pp8-mbs1", "mp1-dp1-pp16-mbs1"};
    json_t *list = json_object_get(r, "strategies");
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(list, i), "name")), amp_top[i]);
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s)
    {
        size_t k;
        json_t *st;
        json_array_foreach(json_object_get(s, "stages"), k, st)
            assert_true(json_integer_value(json_object_get(st, "memory_bytes")) <= 16LL << 30);
    }
    double best = json_real_value(json_object_get(json_object_get(r, "metrics"), "iteration_ms"));
    double uniform = json_real_value(json_object_get(json_object_get(ru, "metrics"), "iteration_ms"));
    print_message("het cluster: searched %.1f ms, best uniform %.1f ms (%.3fx)\n", best, uniform, uniform / best);
    assert_true(best * 1.05 < uniform);
    json_decref(r), json_decref(ru), json_decref(j), json_decref(u);
}

static void test_strategy_errors_name_the_field(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *field, *msg;
    } bad[] = {
        {"{'strategy':[]}", "spec.strategy", "must be an object"},
        {"{'strategy':{'cluster':{}}}", "spec.strategy.layers", "is required"},
        {"{'strategy':{'layers':[{'name':'a'}]}}", "spec.strategy.layers[0].forward_ms", "is required"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':-1}]}}", "spec.strategy.layers[0].forward_ms", "non-negative"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':1}],'global_batch':8}}", "spec.strategy.cluster", "is required"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':1}],'cluster':{'nodes':2,'gpus_per_node':2,'intra_bw_gbps':10},"
         "'global_batch':8}}",
         "spec.strategy.cluster.inter_bw_gbps", "is required"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':1}],'cluster':{'nodes':1,'gpus_per_node':2,'intra_bw_gbps':10,"
         "'gpu_speed':[1,1,1]},'global_batch':8}}",
         "spec.strategy.cluster.gpu_speed", "array of 2"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':1}],'cluster':{'nodes':1,'gpus_per_node':2,'intra_bw_gbps':10}}}",
         "spec.strategy.global_batch", "is required"},
        {"{'strategy':{'layers':[]},'graph':{}}", "spec.strategy", "not both"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':1}],'cluster':{'nodes':2,'gpus_per_node':1,"
         "'bandwidth_gbps':[[1,2]]},'global_batch':8}}",
         "spec.strategy.cluster.bandwidth_gbps", "2 rows"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':1}],'cluster':{'nodes':2,'gpus_per_node':1,"
         "'bandwidth_gbps':[[1,2],[3,0]]},'global_batch':8}}",
         "spec.strategy.cluster.bandwidth_gbps[1]", "entry 1 must be a positive"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':1}],'cluster':{'nodes':1,'gpus_per_node':1,"
         "'bandwidth_gbps':[[1]],'intra_bw_gbps':3},'global_batch':8}}",
         "spec.strategy.cluster.bandwidth_gbps", "not both"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':1}],'cluster':{'nodes':1,'gpus_per_node':2,'intra_bw_gbps':10,"
         "'gpu_memory_bytes':[1e9]},'global_batch':8}}",
         "spec.strategy.cluster.gpu_memory_bytes", "array of 2"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':1}],'cluster':{'nodes':1,'gpus_per_node':1,'intra_bw_gbps':10,"
         "'gpu_memory_bytes':0},'global_batch':8}}",
         "spec.strategy.cluster.gpu_memory_bytes", "positive"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':1,'stash_bytes':-1}]}}", "spec.strategy.layers[0].stash_bytes",
         "non-negative"},
        {"{'strategy':{'layers':[{'name':'a','forward_ms':1}],'cluster':{'nodes':1,'gpus_per_node':1,'intra_bw_gbps':10},"
         "'global_batch':8,'partition':'even'}}",
         "spec.strategy.partition", "balanced"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char field[160] = "", msg[320] = "";
        json_t *spec = J(bad[i].spec);
        int rc = place_spec_validate(spec, field, sizeof field, msg, sizeof msg);
        if (rc != -1 || strcmp(field, bad[i].field) != 0 || !strstr(msg, bad[i].msg))
            fail_msg("case %zu: field '%s' msg '%s'", i, field, msg);
        json_decref(spec);
    }
    /* valid, and solved through place_solve like a placement */
    json_t *spec = json_pack("{s:o}", "strategy", J(TINY));
    char field[160], msg[320], err[512];
    assert_int_equal(place_spec_validate(spec, field, sizeof field, msg, sizeof msg), 0);
    json_t *r = place_solve(spec, err, sizeof err);
    if (!r) fail_msg("%s", err);
    assert_non_null(json_object_get(r, "strategies"));
    json_decref(r);
    json_decref(spec);
}

static void test_128_layers_16_gpus(void **state)
{
    (void)state;
    json_t *layers = json_array();
    for (int i = 0; i < 128; i++) {
        char name[16];
        snprintf(name, sizeof name, "layer%d", i);
        json_array_append_new(layers, json_pack("{s:s,s:f,s:f,s:f}", "name", name, "forward_ms", 0.5 + (i * 37 % 11) * 0.25,
                                                "params", 1e6 * (5 + i % 9), "activation_bytes", 1e6 * (2 + i % 5)));
    }
    json_t *speeds = json_array();
    for (int r = 0; r < 16; r++)
        json_array_append_new(speeds, json_real(r < 8 ? 1.0 : 0.6));
    json_t *j = json_pack("{s:o,s:{s:i,s:i,s:f,s:f,s:o},s:i}", "layers", layers, "cluster", "nodes", 2, "gpus_per_node", 8,
                          "intra_bw_gbps", 300.0, "inter_bw_gbps", 25.0, "gpu_speed", speeds, "global_batch", 512);
    char err[512];
    int64_t t0 = clock_mono_us();
    json_t *r = amp_solve(j, "strategy", err, sizeof err);
    double ms = (double)(clock_mono_us() - t0) / 1000.0;
    if (!r) fail_msg("%s", err);
    print_message("128 layers, 16 GPUs: %d strategies in %.1f ms\n",
                  (int)json_integer_value(json_object_get(json_object_get(r, "metrics"), "evaluated")), ms);
    assert_true(ms < 5000); /* target < 1 s in a release build; generous for sanitizers */
    json_t *best = json_array_get(json_object_get(r, "strategies"), 0);
    assert_null(json_object_get(best, "exact"));
    json_decref(r);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_cluster_by_hand),      cmocka_unit_test(test_slow_gpu_gets_fewer_layers),
        cmocka_unit_test(test_memory_rejects_strategies), cmocka_unit_test(test_memory_moves_the_cut),
        cmocka_unit_test(test_links_per_node_pair),       cmocka_unit_test(test_uniform_partition),
        cmocka_unit_test(test_het_cluster_case_study),    cmocka_unit_test(test_strategy_errors_name_the_field),
        cmocka_unit_test(test_128_layers_16_gpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
