/* The scheduling rules of scheduler/policy.h on hand-built cluster states. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "scheduler/policy.h"

#define MAXW 16
#define MAXJ 32

typedef struct {
    pol_worker w[MAXW];
    pol_job j[MAXJ];
    pol_tenant t[4];
    pol_decision d[MAXJ];
    pol_preemption p[MAXW];
    int nw, nj, nt, np;
} cluster;

static void workers(cluster *c, int n)
{
    c->nw = n;
    for (int i = 0; i < n; i++)
        c->w[i] = (pol_worker){.free = true};
}

static void tenant(cluster *c, const char *id, double weight, int max_slots)
{
    c->t[c->nt++] = (pol_tenant){id, weight, max_slots};
}

static int job(cluster *c, const char *tenant, int prio, int slots)
{
    static const char *ids[MAXJ] = {"j0",  "j1",  "j2",  "j3",  "j4",  "j5",  "j6",  "j7",  "j8",  "j9",  "j10",
                                    "j11", "j12", "j13", "j14", "j15", "j16", "j17", "j18", "j19", "j20", "j21",
                                    "j22", "j23", "j24", "j25", "j26", "j27", "j28", "j29", "j30", "j31"};
    c->j[c->nj] = (pol_job){ids[c->nj], tenant, prio, slots, 0, false, (unsigned long long)c->nj, NULL, 0};
    return c->nj++;
}

static void busy(cluster *c, int w, const char *tenant, int prio, bool preemptible, unsigned long long seq)
{
    c->w[w] = (pol_worker){false, tenant, "running", prio, preemptible, seq, NULL};
}

static int decide(cluster *c)
{
    return policy_decide(c->j, c->nj, c->w, c->nw, c->t, c->nt, c->d, c->p, &c->np);
}

static int placed_for(cluster *c, const char *tenant)
{
    int n = 0;
    for (int i = 0; i < c->nj; i++)
        n += c->d[i].action == POL_PLACE && strcmp(c->j[i].tenant, tenant) == 0;
    return n;
}

static void test_fair_share_equal_weights(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 4);
    tenant(&c, "a", 1, -1);
    tenant(&c, "b", 1, -1);
    for (int i = 0; i < 6; i++)
        job(&c, "a", 1, 1); /* a arrived first with many jobs */
    for (int i = 0; i < 6; i++)
        job(&c, "b", 1, 1);
    assert_int_equal(decide(&c), 4);
    assert_int_equal(placed_for(&c, "a"), 2);
    assert_int_equal(placed_for(&c, "b"), 2);
    assert_int_equal(c.d[0].action, POL_PLACE); /* within a tenant, arrival order */
    assert_int_equal(c.d[5].action, POL_WAIT);
    assert_non_null(strstr(c.d[5].reason, "no capacity"));
}

static void test_fair_share_counts_running_work(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 4);
    tenant(&c, "a", 1, -1);
    tenant(&c, "b", 1, -1);
    busy(&c, 0, "a", 1, false, 1);
    busy(&c, 1, "a", 1, false, 2);
    for (int i = 0; i < 3; i++)
        job(&c, "a", 1, 1);
    for (int i = 0; i < 3; i++)
        job(&c, "b", 1, 1);
    decide(&c);
    assert_int_equal(placed_for(&c, "b"), 2); /* a already holds two */
    assert_int_equal(placed_for(&c, "a"), 0);
}

static void test_weights(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 4);
    tenant(&c, "a", 3, -1);
    tenant(&c, "b", 1, -1);
    for (int i = 0; i < 5; i++)
        job(&c, "b", 1, 1);
    for (int i = 0; i < 5; i++)
        job(&c, "a", 1, 1);
    decide(&c);
    assert_int_equal(placed_for(&c, "a"), 3);
    assert_int_equal(placed_for(&c, "b"), 1);
}

static void test_priority_before_share(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 1);
    tenant(&c, "a", 1, -1);
    tenant(&c, "b", 1, -1);
    job(&c, "a", 1, 1);
    int high = job(&c, "b", 2, 1);
    decide(&c);
    assert_int_equal(c.d[high].action, POL_PLACE);
    assert_int_equal(c.d[0].action, POL_WAIT);
}

static void test_quota(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 4);
    tenant(&c, "a", 1, 1);
    for (int i = 0; i < 3; i++)
        job(&c, "a", 1, 1);
    assert_int_equal(decide(&c), 1);
    assert_int_equal(c.d[1].action, POL_WAIT);
    assert_non_null(strstr(c.d[1].reason, "quota"));
    assert_non_null(strstr(c.d[1].reason, "1 of its 1 slots"));
}

static void test_gang_all_or_nothing_and_reserved(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 3);
    tenant(&c, "a", 1, -1);
    tenant(&c, "b", 1, -1);
    busy(&c, 0, "b", 1, false, 1);
    int gang = job(&c, "a", 1, 3); /* needs all three, one is busy */
    int small = job(&c, "b", 1, 1);
    assert_int_equal(decide(&c), 0);
    assert_int_equal(c.d[gang].action, POL_WAIT);
    assert_non_null(strstr(c.d[gang].reason, "gang incomplete: 2 of 3"));
    /* the small job would fit, but may not take the gang's workers */
    assert_int_equal(c.d[small].action, POL_WAIT);
    /* the other tenant's job is not named to b */
    assert_non_null(strstr(c.d[small].reason, "held for another tenant's job"));
    assert_null(strstr(c.d[small].reason, "j0"));
    assert_true(c.w[1].free && c.w[2].free);

    workers(&c, 3); /* the busy job finished */
    assert_int_equal(decide(&c), 1);
    assert_int_equal(c.d[gang].action, POL_PLACE);
    assert_int_equal(c.d[gang].nworkers, 3);
    assert_false(c.w[0].free || c.w[1].free || c.w[2].free);
}

static void test_preemption(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 3);
    tenant(&c, "a", 1, -1);
    tenant(&c, "b", 1, -1);
    busy(&c, 0, "b", 0, true, 1); /* low, preemptible, oldest */
    busy(&c, 1, "b", 0, true, 5); /* low, preemptible, newest: the victim */
    busy(&c, 2, "b", 1, true, 9); /* normal: not below the job's priority... */
    int j = job(&c, "a", 1, 1);   /* ...which is normal */
    assert_int_equal(decide(&c), 0);
    assert_int_equal(c.np, 1);
    assert_int_equal(c.p[0].worker, 1);
    assert_int_equal(c.p[0].for_job, j);
    assert_non_null(strstr(c.d[j].reason, "preempting 1"));
}

static void test_no_preemption_of_protected_or_equal(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 2);
    tenant(&c, "a", 1, -1);
    busy(&c, 0, "b", 0, false, 1); /* not preemptible */
    busy(&c, 1, "b", 2, true, 2);  /* higher priority */
    int j = job(&c, "a", 2, 1);
    decide(&c);
    assert_int_equal(c.np, 0);
    assert_non_null(strstr(c.d[j].reason, "no capacity"));
}

static void test_gang_preempts_only_when_enough(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 2);
    tenant(&c, "a", 1, -1);
    busy(&c, 0, "b", 0, true, 1);
    busy(&c, 1, "b", 0, false, 2);
    int j = job(&c, "a", 2, 2); /* needs both; only one may be preempted */
    decide(&c);
    assert_int_equal(c.np, 0); /* preempting one would not let it run */
    assert_int_equal(c.d[j].action, POL_WAIT);
}

/* an elastic gang takes leftover workers up to its max, only when nobody else waits */
static void test_elastic_gang_takes_leftovers(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 5);
    tenant(&c, "a", 1, -1);
    int e = job(&c, "a", 1, 2);
    c.j[e].max_slots = 4;
    decide(&c);
    assert_int_equal(c.d[e].action, POL_PLACE);
    assert_int_equal(c.d[e].nworkers, 4); /* min 2, then 2 of the 3 left, up to max 4 */
    memset(&c, 0, sizeof(c));
    workers(&c, 3);
    tenant(&c, "a", 1, -1);
    e = job(&c, "a", 1, 2);
    c.j[e].max_slots = 3;
    int other = job(&c, "a", 1, 2); /* needs 2, only 1 left: it waits, so the gang keeps its min */
    decide(&c);
    assert_int_equal(c.d[e].nworkers, 2);
    assert_int_equal(c.d[other].action, POL_WAIT);
    memset(&c, 0, sizeof(c));
    workers(&c, 6);
    tenant(&c, "a", 1, 3); /* the quota caps the extra workers too */
    e = job(&c, "a", 1, 2);
    c.j[e].max_slots = 6;
    decide(&c);
    assert_int_equal(c.d[e].nworkers, 3);
}

/* a federated job's slots go to the workers labelled with its sites, or it waits naming the site */
static void test_sites_pin_slots(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 5);
    static const char *labels[5] = {NULL, "b", "a", "c", "a"};
    for (int i = 0; i < 5; i++)
        c.w[i].site = labels[i];
    tenant(&c, "t", 1, -1);
    static const char *sites[] = {"a", "b", "a"};
    int f = job(&c, "t", 1, 3);
    c.j[f].sites = sites, c.j[f].nsites = 3;
    int other = job(&c, "t", 1, 1);
    decide(&c);
    assert_int_equal(c.d[f].action, POL_PLACE);
    assert_int_equal(c.d[f].nworkers, 3);
    assert_int_equal(c.d[f].workers[0], 2);         /* a */
    assert_int_equal(c.d[f].workers[1], 1);         /* b */
    assert_int_equal(c.d[f].workers[2], 4);         /* the other a */
    assert_int_equal(c.d[other].action, POL_PLACE); /* the unlabelled or left workers serve the rest */
    /* a site without a free worker: wait, naming it, and hold nothing back for others */
    cluster d = {0};
    workers(&d, 2);
    d.w[0].site = "a", d.w[1].site = "b";
    tenant(&d, "t", 1, -1);
    static const char *need[] = {"a", "z"};
    f = job(&d, "t", 1, 2);
    d.j[f].sites = need, d.j[f].nsites = 2;
    other = job(&d, "t", 1, 1);
    decide(&d);
    assert_int_equal(d.d[f].action, POL_WAIT);
    assert_non_null(strstr(d.d[f].reason, "site z"));
    assert_int_equal(d.d[other].action, POL_PLACE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fair_share_equal_weights),
        cmocka_unit_test(test_fair_share_counts_running_work),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_priority_before_share),
        cmocka_unit_test(test_quota),
        cmocka_unit_test(test_gang_all_or_nothing_and_reserved),
        cmocka_unit_test(test_preemption),
        cmocka_unit_test(test_no_preemption_of_protected_or_equal),
        cmocka_unit_test(test_gang_preempts_only_when_enough),
        cmocka_unit_test(test_elastic_gang_takes_leftovers),
        cmocka_unit_test(test_sites_pin_slots),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
