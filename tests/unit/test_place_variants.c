/* test_place_variants.c - the solver's search over graph variants
 * (workers/place/variant.h): the default weighs co-placement and fusion and
 * returns the best plan labelled with its variant, a flag forces one variant,
 * variants equal to a plainer one are skipped, the search stops close to the
 * lower bound, and the default is never worse than any forced variant. */
#include "test_place_common.c"

#include "workers/place/variant.h"

static json_t *solve_ok(json_t *spec)
{
    char err[512];
    json_t *r = place_solve(spec, err, sizeof err);
    if (!r) fail_msg("%s", err);
    return r;
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (!s) fail_msg("no string '%s'", key);
    return s;
}

static json_int_t weighed(const json_t *r)
{
    return json_integer_value(json_object_get(json_object_get(r, "metrics"), "variants_weighed"));
}

static int is_variant_name(const char *s)
{
    for (int k = 0; k < PLACE_N_VARIANTS; k++)
        if (strcmp(place_variants[k].name, s) == 0) return 1;
    return 0;
}

/* A fork-join with long branches: co-placement and fusion make every chain one unit. */
static const char *CHAINS = "{'ops':[{'name':'a','compute_us':10,'output_bytes':100},"
                            "{'name':'b1','compute_us':10,'output_bytes':100},{'name':'b2','compute_us':10,'output_bytes':100},"
                            "{'name':'c1','compute_us':10,'output_bytes':100},{'name':'c2','compute_us':10,'output_bytes':100},"
                            "{'name':'d','compute_us':10,'output_bytes':100}],"
                            "'edges':[{'src':'a','dst':'b1'},{'src':'b1','dst':'b2'},{'src':'b2','dst':'d'},"
                            "{'src':'a','dst':'c1'},{'src':'c1','dst':'c2'},{'src':'c2','dst':'d'}],"
                            "'devices':[{'name':'g0','memory_bytes':100000},{'name':'g1','memory_bytes':100000}],"
                            "'comm':{'latency_us':1000,'bytes_per_us':1}}";

static json_t *spec_of(const char *graph, const char *rest)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "{'graph':%s%s}", graph, rest);
    return J(buf);
}

static void test_default_weighs_variants_and_labels(void **state)
{
    (void)state;
    json_t *spec = spec_of(CHAINS, ",'algorithms':['all']"), *r = solve_ok(spec);
    /* transfers cost 1000+ us, so one device is best (60 us = the total work); no variant reaches the
     * critical-path bound (40 us) within 1%, so every distinct variant is weighed */
    assert_true(weighed(r) >= 2);
    assert_true(is_variant_name(str(r, "variant")));
    assert_string_equal(str(r, "variant"), str(json_object_get(r, "plan"), "variant"));
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(r, "candidates"), i, c)
    {
        assert_true(is_variant_name(str(c, "variant")));
        json_t *vs = json_object_get(c, "variants");
        assert_int_equal(json_array_size(vs), weighed(r));
        size_t k;
        json_t *v;
        int own = 0;
        json_array_foreach(vs, k, v)
        {
            assert_true(is_variant_name(str(v, "variant")));
            own += !strcmp(str(v, "variant"), str(c, "variant"));
            /* the line shown is the algorithm's fastest feasible variant */
            if (json_is_true(json_object_get(c, "feasible")) && json_is_true(json_object_get(v, "feasible")))
                assert_true(json_real_value(json_object_get(c, "makespan_us")) <=
                            json_real_value(json_object_get(v, "makespan_us")));
        }
        assert_int_equal(own, 1);
    }
    json_decref(r);
    json_decref(spec);
}

static void test_flags_force_one_variant(void **state)
{
    (void)state;
    static const struct {
        const char *flags, *variant;
    } cases[] = {
        {",'fuse':true", "fuse"},
        {",'coplace':true", "coplace"},
        {",'fuse':true,'coplace':true", "coplace+fuse"},
        {",'fuse':false", "plain"},
        {",'coplace':false,'fuse':false", "plain"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        json_t *spec = spec_of(CHAINS, cases[k].flags), *r = solve_ok(spec);
        assert_int_equal(weighed(r), 1);
        assert_string_equal(str(r, "variant"), cases[k].variant);
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(r, "candidates"), i, c)
        {
            assert_string_equal(str(c, "variant"), cases[k].variant);
            assert_null(json_object_get(c, "variants"));
        }
        json_decref(r);
        json_decref(spec);
    }
}

static void test_redundant_variants_skipped(void **state)
{
    (void)state;
    /* every producer has two consumers and there are no groups: co-placement joins nothing and
     * fusion merges nothing, so the three other variants are the plain graph */
    json_t *spec = J("{'graph':{'ops':[{'name':'a','compute_us':5},{'name':'b','compute_us':7},"
                     "{'name':'c','compute_us':3},{'name':'d','compute_us':4}],"
                     "'edges':[{'src':'a','dst':'c'},{'src':'a','dst':'d'},{'src':'b','dst':'c'},{'src':'b','dst':'d'}],"
                     "'devices':[{'name':'g0','memory_bytes':1000}]},'algorithms':['all']}");
    json_t *r = solve_ok(spec);
    assert_int_equal(weighed(r), 1);
    assert_string_equal(str(r, "variant"), "plain");
    json_decref(r);
    json_decref(spec);
}

static json_t *candidate(const json_t *r, const char *algo)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(r, "candidates"), i, c) if (!strcmp(str(c, "algorithm"), algo)) return c;
    fail_msg("no candidate %s", algo);
    return NULL;
}

static void test_search_stops_at_the_bound(void **state)
{
    (void)state;
    /* a chain: m-TOPO's plan on the plain graph is the lower bound, so m-ETF runs there only;
     * the cheap algorithms run on every variant, and the tie goes to the plain graph */
    json_t *spec = J("{'graph':{'ops':[{'name':'a','compute_us':5,'output_bytes':10},{'name':'b','compute_us':7,"
                     "'output_bytes':10},{'name':'c','compute_us':3}],'edges':[{'src':'a','dst':'b'},{'src':'b','dst':'c'}],"
                     "'devices':[{'name':'g0','memory_bytes':1000},{'name':'g1','memory_bytes':1000}]},"
                     "'algorithms':['m-etf']}");
    json_t *r = solve_ok(spec);
    assert_true(weighed(r) >= 2);
    assert_string_equal(str(r, "variant"), "plain");
    assert_close(json_real_value(json_object_get(json_object_get(r, "metrics"), "makespan_us")), 15.0);
    assert_close(json_real_value(json_object_get(r, "lower_bound_us")), 15.0);
    json_t *etf = candidate(r, "m-etf"), *topo = candidate(r, "m-topo");
    assert_string_equal(str(etf, "variant"), "plain");
    assert_null(json_object_get(etf, "variants"));
    assert_int_equal(json_array_size(json_object_get(topo, "variants")), weighed(r));
    /* requested first */
    assert_string_equal(str(json_array_get(json_object_get(r, "candidates"), 0), "algorithm"), "m-etf");
    json_decref(r);
    json_decref(spec);
}

static void test_failure_names_the_users_op(void **state)
{
    (void)state;
    /* nothing fits: the reason is the first requested algorithm's on the plain graph */
    json_t *spec = J("{'graph':{'ops':[{'name':'w','compute_us':1,'persistent_bytes':900},{'name':'x','compute_us':1,"
                     "'persistent_bytes':900}],'edges':[{'src':'w','dst':'x'}],'devices':[{'name':'g0','memory_bytes':1000}]},"
                     "'algorithms':['m-etf']}");
    char err[512];
    assert_null(place_solve(spec, err, sizeof err));
    assert_non_null(strstr(err, "no feasible placement; m-etf: op '"));
    json_decref(spec);
}

/* The makespan of the result's best plan, or -1 when nothing was feasible. */
static double best_makespan(json_t *spec)
{
    char err[512];
    json_t *r = place_solve(spec, err, sizeof err);
    if (!r) return -1;
    double m = json_real_value(json_object_get(json_object_get(r, "metrics"), "makespan_us"));
    json_decref(r);
    return m;
}

static void test_default_never_worse_than_a_forced_variant(void **state)
{
    (void)state;
    static const dag_shape shapes[] = {
        {.min_ops = 20, .max_ops = 80, .devices = 3, .mem_factor = 0.7},
        {.min_ops = 20, .max_ops = 80, .devices = 4, .groups = 1, .mem_factor = 0.8},
        {.min_ops = 20, .max_ops = 80, .devices = 3, .hetero = 1, .link_matrix = 1},
    };
    int improved = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (uint64_t seed = 1; seed <= 40; seed++) {
            json_t *graph = random_dag(seed, &shapes[s]);
            json_t *spec = json_pack("{s:O,s:[s]}", "graph", graph, "algorithms", "all");
            double dflt = best_makespan(spec), forced_best = -1, plain = -1;
            for (int k = 0; k < PLACE_N_VARIANTS; k++) {
                json_object_set_new(spec, "coplace", json_boolean(place_variants[k].coplace));
                json_object_set_new(spec, "fuse", json_boolean(place_variants[k].fuse));
                double m = best_makespan(spec);
                if (m >= 0 && (forced_best < 0 || m < forced_best)) forced_best = m;
                if (!place_variants[k].coplace && !place_variants[k].fuse) plain = m;
            }
            if (forced_best >= 0 && dflt < 0)
                fail_msg("shape %zu seed %d: a forced variant is feasible, the default not", s, (int)seed);
            /* the search may stop within PLACE_SEARCH_CLOSE of the lower bound, so of any forced plan */
            if (forced_best >= 0 && dflt > forced_best * PLACE_SEARCH_CLOSE + 1e-6)
                fail_msg("shape %zu seed %d: default %.3f, a forced variant %.3f", s, (int)seed, dflt, forced_best);
            improved += plain < 0 ? dflt >= 0 : dflt < plain - 1e-6;
            json_decref(spec);
            json_decref(graph);
        }
    /* the search pays off somewhere: better than the plain graph on some of these DAGs */
    assert_true(improved > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_weighs_variants_and_labels), cmocka_unit_test(test_flags_force_one_variant),
        cmocka_unit_test(test_redundant_variants_skipped),         cmocka_unit_test(test_search_stops_at_the_bound),
        cmocka_unit_test(test_failure_names_the_users_op),         cmocka_unit_test(test_default_never_worse_than_a_forced_variant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
