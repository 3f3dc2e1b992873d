/* test_search.c - spec/search_spec and spec/search_algo: spec.search's validation (every rule naming its
 * field, through the program spec as the server validates it), the defaults, the draws (reproducible,
 * in bounds), the grid's enumeration, asha's rungs and its rule at a rung (hand-checked cases and a
 * property test against a brute-force ranking), the paused variant's promotion (by hand and against a
 * sorted ranking), and how many trials start. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testjson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "spec/program_spec.h"
#include "spec/search_algo.h"
#include "spec/search_spec.h"

#define PROG "'program':{'command':['python3','train.py'],'workdir':'code'}"
#define SPACE "'space':{'lr':{'loguniform':[0.0001,0.1]},'width':{'choice':[16,32,64]},'batch':{'int':[32,256]}}"

/* spec.search text -> whole program spec, validated as the server does */
static void expect_field(const char *search, const char *field)
{
    char text[2048];
    snprintf(text, sizeof text, "{" PROG ",'search':%s}", search);
    json_t *j = J(text);
    char f[256] = "", m[512] = "";
    assert_int_equal(program_spec_validate(j, f, sizeof f, m, sizeof m), -1);
    if (strcmp(f, field)) fail_msg("field %s, want %s (%s: %s)", f, field, search, m);
    assert_true(strlen(m) > 0);
    json_decref(j);
}

static void expect_ok(const char *search)
{
    char text[2048];
    snprintf(text, sizeof text, "{" PROG ",'search':%s}", search);
    json_t *j = J(text);
    char f[256] = "", m[512] = "";
    if (program_spec_validate(j, f, sizeof f, m, sizeof m)) fail_msg("%s refused: %s %s", search, f, m);
    json_decref(j);
}

static void test_validation_names_the_field(void **state)
{
    (void)state;
    expect_ok("{" SPACE ",'metric':'test_accuracy'}");
    expect_ok("{" SPACE ",'algorithm':'asha','metric':'test_accuracy','mode':'max','max_trials':24,'parallel':4,"
              "'budget':{'resource':'epoch','min':1,'max':9,'reduction':3},'seed':1,'max_failures':2}");
    expect_ok("{'space':{'w':{'choice':[1,'a',true]},'n':{'int':[1,3]}},'algorithm':'grid','metric':'loss','mode':'min'}");
    expect_field("{'metric':'acc'}", "spec.search.space");
    expect_field("{" SPACE "}", "spec.search.metric");
    expect_field("{'space':{},'metric':'acc'}", "spec.search.space");
    expect_field("{" SPACE ",'metric':'acc','algorithm':'bayes'}", "spec.search.algorithm");
    expect_field("{" SPACE ",'metric':'acc','mode':'up'}", "spec.search.mode");
    expect_field("{" SPACE ",'metric':'acc','pause':true}", "spec.search.pause"); /* random does not pause */
    expect_field("{" SPACE ",'metric':'acc','algorithm':'asha','budget':{'max':9},'pause':1}", "spec.search.pause");
    expect_ok("{" SPACE ",'metric':'acc','algorithm':'asha','budget':{'max':9},'pause':true}");
    expect_field("{" SPACE ",'metric':'acc','parallel':0}", "spec.search.parallel");
    expect_field("{" SPACE ",'metric':'acc','max_trials':0}", "spec.search.max_trials");
    expect_field("{" SPACE ",'metric':'acc','seed':-1}", "spec.search.seed");
    expect_field("{" SPACE ",'metric':'acc','max_failures':-1}", "spec.search.max_failures");
    expect_field("{" SPACE ",'metric':'a b'}", "spec.search.metric");
    expect_field("{" SPACE ",'metric':'acc','extra':1}", "spec.search.extra");
    expect_field("{'space':{'lr':{'uniform':[0,1],'int':[1,2]}},'metric':'acc'}", "spec.search.space.lr");
    expect_field("{'space':{'lr':{}},'metric':'acc'}", "spec.search.space.lr");
    expect_field("{'space':{'lr':{'normal':[0,1]}},'metric':'acc'}", "spec.search.space.lr.normal");
    expect_field("{'space':{'lr':{'loguniform':[0,1]}},'metric':'acc'}", "spec.search.space.lr.loguniform");
    expect_field("{'space':{'lr':{'uniform':[1,1]}},'metric':'acc'}", "spec.search.space.lr.uniform");
    expect_field("{'space':{'lr':{'uniform':[1]}},'metric':'acc'}", "spec.search.space.lr.uniform");
    expect_field("{'space':{'n':{'int':[3,1]}},'metric':'acc'}", "spec.search.space.n.int");
    expect_field("{'space':{'n':{'int':[1.5,3]}},'metric':'acc'}", "spec.search.space.n.int[0]");
    expect_field("{'space':{'w':{'choice':[]}},'metric':'acc'}", "spec.search.space.w.choice");
    expect_field("{'space':{'w':{'choice':[1,{}]}},'metric':'acc'}", "spec.search.space.w.choice[1]");
    expect_field("{'space':{'1w':{'choice':[1]}},'metric':'acc'}", "spec.search.space.1w");
    expect_field("{'space':{'rank':{'choice':[1]}},'metric':'acc'}", "spec.search.space.rank");
    expect_field("{'space':{'gantry_x':{'choice':[1]}},'metric':'acc'}", "spec.search.space.gantry_x");
    expect_field("{'space':{'lr':{'uniform':[0,1]}},'metric':'acc','algorithm':'grid'}", "spec.search.space.lr.uniform");
    expect_field("{'space':{'n':{'int':[1,3]}},'metric':'acc','algorithm':'grid','max_trials':4}", "spec.search.max_trials");
    expect_field("{'space':{'n':{'int':[1,2000]}},'metric':'acc','algorithm':'grid'}", "spec.search.space");
    expect_field("{" SPACE ",'metric':'acc','algorithm':'asha'}", "spec.search.budget");
    expect_field("{" SPACE ",'metric':'acc','algorithm':'asha','budget':{'min':9,'max':9}}", "spec.search.budget.max");
    expect_field("{" SPACE ",'metric':'acc','budget':{'min':9,'max':3}}", "spec.search.budget.max");
    expect_field("{" SPACE ",'metric':'acc','budget':{'min':1}}", "spec.search.budget.max");
    expect_field("{" SPACE ",'metric':'acc','budget':{'max':9,'reduction':1}}", "spec.search.budget.reduction");
    expect_field("{" SPACE ",'metric':'acc','budget':{'max':9,'resource':'a-b'}}", "spec.search.budget.resource");

    /* with register_model: accepted (the search registers its best finished trial's output), checked as
     * without a search */
    json_t *j = J("{" PROG ",'search':{" SPACE ",'metric':'acc'},'register_model':{'output':'m.pt'},'model_name':'tuned'}");
    char f[256] = "", m[512] = "";
    assert_int_equal(program_spec_validate(j, f, sizeof f, m, sizeof m), 0);
    json_decref(j);
    j = J("{" PROG ",'search':{" SPACE ",'metric':'acc'},'register_model':{'output':'../m.pt'}}");
    assert_int_equal(program_spec_validate(j, f, sizeof f, m, sizeof m), -1);
    assert_string_equal(f, "spec.register_model.output");
    json_decref(j);
    j = J("{" PROG ",'search':{" SPACE ",'metric':'acc'},'register_model':{'output':'m.pt','metadata':{'inputs':[]}}}");
    assert_int_equal(program_spec_validate(j, f, sizeof f, m, sizeof m), -1);
    assert_true(strncmp(f, "spec.register_model.metadata", 28) == 0);
    json_decref(j);
}

static void test_defaults(void **state)
{
    (void)state;
    json_t *j = J("{" SPACE ",'metric':'test_accuracy'}");
    search_settings s;
    search_settings_get(j, &s);
    assert_int_equal(s.algorithm, SEARCH_RANDOM);
    assert_true(s.maximize);
    assert_int_equal(s.max_trials, 10);
    assert_int_equal(s.parallel, 2);
    assert_int_equal(s.max_failures, 2);
    assert_int_equal((int)s.seed, 1);
    assert_false(s.has_budget);
    assert_false(s.pause);
    assert_string_equal(s.resource, "epoch");
    assert_int_equal(s.nparams, 3); /* sorted by name */
    assert_string_equal(s.params[0].name, "batch");
    assert_string_equal(s.params[1].name, "lr");
    assert_string_equal(s.params[2].name, "width");
    assert_int_equal(s.params[1].kind, PARAM_LOGUNIFORM);
    json_decref(j);
    j = J("{'space':{'a':{'choice':[1,2]},'b':{'int':[0,2]}},'metric':'loss','mode':'min','algorithm':'grid'}");
    search_settings_get(j, &s);
    assert_int_equal(s.max_trials, 6); /* the grid's size */
    assert_false(s.maximize);
    json_decref(j);
}

static void test_draws_reproducible_in_bounds(void **state)
{
    (void)state;
    json_t *j = J("{" SPACE ",'metric':'acc','seed':7}");
    search_settings s;
    search_settings_get(j, &s);
    int distinct = 0;
    for (int i = 0; i < 200; i++) {
        json_t *a = search_trial_params(&s, i), *b = search_trial_params(&s, i);
        assert_true(json_equal(a, b)); /* (seed, i) alone */
        double lr = json_number_value(json_object_get(a, "lr"));
        assert_true(lr >= 0.0001 && lr <= 0.1);
        json_t *batch = json_object_get(a, "batch");
        assert_true(json_is_integer(batch) && json_integer_value(batch) >= 32 && json_integer_value(batch) <= 256);
        long long w = json_integer_value(json_object_get(a, "width"));
        assert_true(w == 16 || w == 32 || w == 64);
        json_t *prev = i ? search_trial_params(&s, i - 1) : NULL;
        if (prev && !json_equal(prev, a)) distinct++;
        json_decref(prev);
        json_decref(a);
        json_decref(b);
    }
    assert_true(distinct > 190);
    /* log-uniform: about half the draws below the geometric middle (0.00316) */
    int low = 0;
    for (int i = 0; i < 1000; i++) {
        json_t *a = search_trial_params(&s, i);
        low += json_number_value(json_object_get(a, "lr")) < sqrt(0.0001 * 0.1);
        json_decref(a);
    }
    assert_true(low > 400 && low < 600);
    /* another seed, other draws */
    json_t *j2 = J("{" SPACE ",'metric':'acc','seed':8}");
    search_settings s2;
    search_settings_get(j2, &s2);
    json_t *a = search_trial_params(&s, 0), *b = search_trial_params(&s2, 0);
    assert_false(json_equal(a, b));
    json_decref(a);
    json_decref(b);
    json_decref(j2);
    json_decref(j);
}

static void test_grid_enumerates_every_point(void **state)
{
    (void)state;
    json_t *j = J("{'space':{'b':{'int':[0,2]},'a':{'choice':['x','y']}},'metric':'loss','algorithm':'grid'}");
    search_settings s;
    search_settings_get(j, &s);
    static const char *const want[] = {"{'a':'x','b':0}", "{'a':'x','b':1}", "{'a':'x','b':2}",
                                       "{'a':'y','b':0}", "{'a':'y','b':1}", "{'a':'y','b':2}"};
    for (int i = 0; i < 6; i++) {
        json_t *p = search_trial_params(&s, i), *w = J(want[i]);
        if (!json_equal(p, w)) fail_msg("grid point %d", i);
        json_decref(p);
        json_decref(w);
    }
    json_decref(j);
}

static void test_rungs(void **state)
{
    (void)state;
    double r[SEARCH_MAX_RUNGS];
    json_t *j = J("{" SPACE ",'metric':'acc','algorithm':'asha','budget':{'min':1,'max':9,'reduction':3}}");
    search_settings s;
    search_settings_get(j, &s);
    assert_int_equal(search_rungs(&s, r, SEARCH_MAX_RUNGS), 2); /* 1, 3 (9 is the end, not a rung) */
    assert_true(r[0] == 1 && r[1] == 3);
    json_decref(j);
    j = J("{" SPACE ",'metric':'acc','algorithm':'asha','budget':{'min':2,'max':20,'reduction':2}}");
    search_settings_get(j, &s);
    assert_int_equal(search_rungs(&s, r, SEARCH_MAX_RUNGS), 4); /* 2, 4, 8, 16 */
    assert_true(r[3] == 16);
    json_decref(j);
    j = J("{" SPACE ",'metric':'acc','budget':{'max':9}}"); /* random: no rungs */
    search_settings_get(j, &s);
    assert_int_equal(search_rungs(&s, r, SEARCH_MAX_RUNGS), 0);
    json_decref(j);
}

static void test_asha_rule_by_hand(void **state)
{
    (void)state;
    asha_verdict v = search_asha_rule(NULL, 0, 0.5, true, 3); /* the first at a rung continues */
    assert_false(v.stop);
    assert_int_equal(v.n, 1);
    assert_int_equal(v.keep, 1);
    double one[] = {0.8};
    v = search_asha_rule(one, 1, 0.7, true, 3); /* 2 results, 1 continues: 0.8 */
    assert_true(v.stop);
    assert_true(v.cut == 0.8);
    v = search_asha_rule(one, 1, 0.9, true, 3);
    assert_false(v.stop);
    assert_true(v.cut == 0.9);
    v = search_asha_rule(one, 1, 0.8, true, 3); /* a tie with the cut continues */
    assert_false(v.stop);
    v = search_asha_rule(one, 1, 0.4, false, 3); /* min: lower is better */
    assert_false(v.stop);
    v = search_asha_rule(one, 1, 0.9, false, 3);
    assert_true(v.stop);
    double three[] = {0.1, 0.3, 0.2};
    v = search_asha_rule(three, 3, 0.25, true, 2); /* 4 results, 2 continue: 0.3, 0.25 */
    assert_false(v.stop);
    assert_int_equal(v.keep, 2);
    assert_true(v.cut == 0.25);
    v = search_asha_rule(three, 3, 0.15, true, 2); /* 0.3, 0.2 continue; cut 0.2 */
    assert_true(v.stop);
    assert_true(v.cut == 0.2);
    double six[] = {0.5, 0.6, 0.7, 0.8, 0.9, 0.95};
    v = search_asha_rule(six, 6, 0.85, true, 3); /* 7 results, ceil(7/3) = 3 continue: 0.95, 0.9, 0.85 */
    assert_int_equal(v.keep, 3);
    assert_false(v.stop);
    v = search_asha_rule(six, 6, 0.75, true, 3);
    assert_true(v.stop);
    assert_true(v.cut == 0.8);
}

/* brute force: the rank of value among all (1 + the strictly better) against ceil(n / eta) */
static void test_asha_rule_property(void **state)
{
    (void)state;
    rng_state r;
    rng_seed(&r, 42);
    for (int round = 0; round < 2000; round++) {
        int n = (int)rng_below(&r, 40), eta = 2 + (int)rng_below(&r, 4);
        bool maximize = rng_below(&r, 2);
        double vals[41];
        for (int i = 0; i <= n; i++)
            vals[i] = (double)rng_below(&r, 20) / 10; /* ties on purpose */
        double value = vals[n];
        asha_verdict v = search_asha_rule(vals, n, value, maximize, eta);
        int better = 0;
        for (int i = 0; i < n; i++)
            better += maximize ? vals[i] > value : vals[i] < value;
        int keep = (n + 1 + eta - 1) / eta;
        assert_int_equal(v.keep, keep);
        assert_int_equal(v.stop, better >= keep);
        /* the cut is a result, and value continues exactly when it is not worse than the cut */
        bool is_result = v.cut == value;
        for (int i = 0; i < n; i++)
            is_result |= vals[i] == v.cut;
        assert_true(is_result);
        assert_int_equal(v.stop, maximize ? value < v.cut : value > v.cut);
        /* symmetric in the mode */
        double neg[41];
        for (int i = 0; i <= n; i++)
            neg[i] = -vals[i];
        asha_verdict w = search_asha_rule(neg, n, -value, !maximize, eta);
        assert_int_equal(v.stop, w.stop);
        assert_true(w.cut == -v.cut);
    }
    /* over a whole rung in any arrival order the best result continues; arriving best-first, only the first
     * does (each later one ranks last of n >= 2); arriving worst-first, every one does (each ranks first) */
    for (int round = 0; round < 500; round++) {
        int n = 1 + (int)rng_below(&r, 30), eta = 2 + (int)rng_below(&r, 3);
        double vals[31];
        int best = 0, continued = 0;
        for (int i = 0; i < n; i++) {
            vals[i] = (double)rng_next(&r) / 18446744073709551616.0;
            if (vals[i] > vals[best]) best = i;
        }
        for (int i = 0; i < n; i++) {
            asha_verdict v = search_asha_rule(vals, i, vals[i], true, eta);
            if (i == best) assert_false(v.stop);
            continued += !v.stop;
        }
        assert_true(continued >= 1);
        double up[31], down[31];
        for (int i = 0; i < n; i++)
            up[i] = i, down[i] = n - i;
        int cu = 0, cd = 0;
        for (int i = 0; i < n; i++) {
            cu += !search_asha_rule(up, i, up[i], true, eta).stop;
            cd += !search_asha_rule(down, i, down[i], true, eta).stop;
        }
        assert_int_equal(cu, n);
        assert_int_equal(cd, 1);
    }
}

/* the paused variant's promotion at a rung, by hand: eta 3 */
static void test_asha_promotable_by_hand(void **state)
{
    (void)state;
    asha_record r[7] = {{0, 0.5, false}, {1, 0.9, false}};
    assert_int_equal(search_asha_promotable(r, 2, true, 3), -1); /* floor(2/3) = 0: nobody yet */
    r[2] = (asha_record){2, 0.7, false};
    assert_int_equal(search_asha_promotable(r, 3, true, 3), 1);  /* the best of 3 */
    assert_int_equal(search_asha_promotable(r, 3, false, 3), 0); /* min: the lowest */
    r[1].promoted = true;
    assert_int_equal(search_asha_promotable(r, 3, true, 3), -1); /* the top 1 is promoted already */
    r[3] = (asha_record){3, 0.1, false}, r[4] = (asha_record){4, 0.2, false}, r[5] = (asha_record){5, 0.7, false};
    assert_int_equal(search_asha_promotable(r, 6, true, 3), 2); /* top 2: 1 (done), then 2 and 5 tie: 2 */
    r[2].promoted = true;
    assert_int_equal(search_asha_promotable(r, 6, true, 3), -1); /* 5 ties with 2 but is third */
    r[6] = (asha_record){6, 0.95, false};
    assert_int_equal(search_asha_promotable(r, 7, true, 3), 6); /* a new best enters the top 2 */
}

static int by_rank_max(const void *a, const void *b)
{
    const asha_record *x = a, *y = b;
    return x->value != y->value ? (x->value < y->value) - (x->value > y->value) : x->trial - y->trial;
}

/* against the definition written another way: sort best first, take floor(n/eta), the first not promoted */
static void test_asha_promotable_property(void **state)
{
    (void)state;
    rng_state r;
    rng_seed(&r, 7);
    for (int round = 0; round < 20000; round++) {
        int n = (int)rng_below(&r, 30), eta = 2 + (int)rng_below(&r, 4);
        bool maximize = rng_below(&r, 2);
        asha_record recs[30], sorted[30];
        for (int i = 0; i < n; i++)
            recs[i] = (asha_record){.trial = (int)rng_below(&r, 1000) * 30 + i,
                                    .value = (double)rng_below(&r, 8) / 4,
                                    .promoted = rng_below(&r, 3) == 0};
        for (int i = 0; i < n; i++) /* min: ranking -value best first is the same order */
            sorted[i] = recs[i], sorted[i].value = maximize ? recs[i].value : -recs[i].value;
        qsort(sorted, (size_t)n, sizeof sorted[0], by_rank_max);
        int want = -1;
        for (int i = 0; i < n / eta && want < 0; i++)
            if (!sorted[i].promoted) want = sorted[i].trial;
        int got = search_asha_promotable(recs, n, maximize, eta);
        if ((want < 0) != (got < 0) || (got >= 0 && recs[got].trial != want))
            fail_msg("round %d: n %d eta %d: promoted %d, want trial %d", round, n, eta, got < 0 ? -1 : recs[got].trial, want);
    }
}

static void test_to_start(void **state)
{
    (void)state;
    json_t *j = J("{" SPACE ",'metric':'acc','max_trials':10,'parallel':4}");
    search_settings s;
    search_settings_get(j, &s);
    assert_int_equal(search_to_start(&s, 0, 0), 4);
    assert_int_equal(search_to_start(&s, 4, 4), 0);
    assert_int_equal(search_to_start(&s, 5, 3), 1);
    assert_int_equal(search_to_start(&s, 9, 2), 1);
    assert_int_equal(search_to_start(&s, 10, 0), 0);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validation_names_the_field),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_draws_reproducible_in_bounds),
        cmocka_unit_test(test_grid_enumerates_every_point),
        cmocka_unit_test(test_rungs),
        cmocka_unit_test(test_asha_rule_by_hand),
        cmocka_unit_test(test_asha_rule_property),
        cmocka_unit_test(test_asha_promotable_by_hand),
        cmocka_unit_test(test_asha_promotable_property),
        cmocka_unit_test(test_to_start),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
