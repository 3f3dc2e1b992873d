/* The scheduling rules of scheduler/policy.h on hand-built cluster states. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "scheduler/autoscale/autoscale_policy.h"
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
    c->j[c->nj] = (pol_job){ids[c->nj], tenant, prio, slots, 0, false, (unsigned long long)c->nj, NULL, 0, false, NULL};
    return c->nj++;
}

static void busy(cluster *c, int w, const char *tenant, int prio, bool preemptible, unsigned long long seq)
{
    c->w[w] = (pol_worker){false, tenant, "running", prio, preemptible, seq, NULL, false, 0, NULL};
}

/* worker w serves a replica of inference job `id` (its minimum: min replicas) */
static void serving(cluster *c, int w, const char *tenant, const char *id, int prio, int min)
{
    c->w[w] = (pol_worker){false, tenant, id, prio, false, (unsigned long long)w, NULL, true, min, NULL};
}

static pol_claim last_claim;

static int decide(cluster *c)
{
    return policy_decide_claim(c->j, c->nj, c->w, c->nw, c->t, c->nt, c->d, c->p, &c->np, &last_claim);
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
    assert_non_null(strstr(c.d[gang].reason, "gang incomplete: 2 of 3 workers free"));
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
    assert_non_null(strstr(d.d[f].reason, "site=z"));
    assert_int_equal(d.d[other].action, POL_PLACE);
}

/* sites pinned to identity keys (spec.sites[k].public_key) go to the workers holding them, whatever the order of the
 * workers, with or without a label; a key no free worker holds makes the job wait, naming the field */
static void test_sites_pinned_to_keys(void **state)
{
    (void)state;
    static const char *k0 = "ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
                      *k1 = "ed25519:BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA=";
    cluster c = {0};
    workers(&c, 4);
    c.w[0].site_key = NULL, c.w[1].site_key = k1, c.w[2].site_key = NULL, c.w[3].site_key = k0;
    c.w[3].site = "h"; /* a labelled worker with a key */
    tenant(&c, "t", 1, -1);
    static const char *labels[] = {"h", NULL, NULL};
    const char *keys[] = {k0, k1, NULL};
    int f = job(&c, "t", 1, 3);
    c.j[f].sites = labels, c.j[f].site_keys = keys, c.j[f].nsites = 3;
    decide(&c);
    assert_int_equal(c.d[f].action, POL_PLACE);
    assert_int_equal(c.d[f].workers[0], 3); /* label h and key k0 */
    assert_int_equal(c.d[f].workers[1], 1); /* key k1, though worker 0 is free and comes first */
    assert_int_equal(c.d[f].workers[2], 0); /* no pin: the first free other worker */
    /* k1's worker busy: the job waits, naming the site's field; a key no worker holds, likewise */
    cluster d = {0};
    workers(&d, 4);
    d.w[3].site_key = k0, d.w[3].site = "h";
    busy(&d, 1, "u", 1, false, 1);
    d.w[1].site_key = k1;
    tenant(&d, "t", 1, -1);
    tenant(&d, "u", 1, -1);
    f = job(&d, "t", 1, 3);
    d.j[f].sites = labels, d.j[f].site_keys = keys, d.j[f].nsites = 3;
    decide(&d);
    assert_int_equal(d.d[f].action, POL_WAIT);
    assert_non_null(strstr(d.d[f].reason, "spec.sites[1]: the worker holding its public_key is busy"));
    d.w[1].site_key = NULL;
    decide(&d);
    assert_int_equal(d.d[f].action, POL_WAIT);
    assert_non_null(strstr(d.d[f].reason, "no worker holds the key spec.sites[1].public_key (ed25519:BBBBBBBBBBBB"));
    /* the label's worker without the site's key */
    d.w[3].site_key = k1;
    decide(&d);
    assert_non_null(strstr(d.d[f].reason, "no worker labelled site=h holds the key spec.sites[0].public_key"));
}

/* Backfill: behind a gang that holds free workers while it waits for busy ones, a short job
 * (placement) may use them; a job that may run long may not */
static void test_backfill_short_jobs_behind_a_gang(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 4);
    tenant(&c, "a", 1, -1);
    tenant(&c, "b", 1, -1);
    busy(&c, 0, "b", 1, false, 1);
    int gang = job(&c, "a", 1, 4);
    int place = job(&c, "b", 1, 1);
    c.j[place].brief = true;
    int train = job(&c, "b", 1, 1);
    int place2 = job(&c, "a", 1, 1);
    c.j[place2].brief = true;
    assert_int_equal(decide(&c), 2);
    assert_int_equal(c.d[gang].action, POL_WAIT);
    assert_non_null(strstr(c.d[gang].reason, "gang incomplete: 3 of 4 workers free"));
    assert_non_null(strstr(c.d[gang].reason, "until 1 running job finishes"));
    assert_int_equal(c.d[place].action, POL_PLACE);
    assert_int_equal(c.d[place2].action, POL_PLACE);
    assert_int_equal(c.d[train].action, POL_WAIT);
    assert_non_null(strstr(c.d[train].reason, "held for another tenant's job"));
    assert_int_equal(last_claim.priority, 1); /* the gang claims; no inference job to give anything back */
    assert_string_equal(last_claim.job_id, "j0");
}

/* A gang that cannot start while an inference job serves at its minimum holds nothing back and says
 * what unblocks it; the tenant's later jobs run meanwhile (before: "holding them", and "held for job")*/
static void test_gang_blocked_by_inference_at_its_minimum(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 2);
    tenant(&c, "a", 1, -1);
    serving(&c, 0, "a", "j_serve", 1, 1);
    int gang = job(&c, "a", 1, 2);
    int train = job(&c, "a", 1, 1);
    assert_int_equal(decide(&c), 1);
    assert_int_equal(c.d[gang].action, POL_WAIT);
    assert_non_null(strstr(c.d[gang].reason, "gang incomplete: 1 of 2 workers free"));
    assert_non_null(strstr(c.d[gang].reason, "inference job j_serve"));
    assert_non_null(strstr(c.d[gang].reason, "its minimum"));
    assert_non_null(strstr(c.d[gang].reason, "cancel j_serve or add a worker"));
    assert_int_equal(c.d[train].action, POL_PLACE);
    assert_int_equal(c.d[train].workers[0], 1);
    assert_int_equal(last_claim.priority, 1); /* the inference job must not grow into the free worker (and gives */
    assert_int_equal(last_claim.workers, 1);  /* back what it has above its minimum: here nothing) */

    /* another tenant's gang: the inference job is not named to it */
    cluster d = {0};
    workers(&d, 2);
    tenant(&d, "b", 1, -1);
    serving(&d, 0, "a", "j_serve", 1, 1);
    gang = job(&d, "b", 1, 2);
    decide(&d);
    assert_null(strstr(d.d[gang].reason, "j_serve"));
    assert_non_null(strstr(d.d[gang].reason, "another tenant's inference job"));
    assert_non_null(strstr(d.d[gang].reason, "add a worker"));

    /* an inference job of a higher priority does not give way, even above its minimum */
    cluster e = {0};
    workers(&e, 3);
    tenant(&e, "a", 1, -1);
    serving(&e, 0, "a", "j_serve", 2, 1);
    serving(&e, 1, "a", "j_serve", 2, 1);
    gang = job(&e, "a", 1, 2);
    int small = job(&e, "a", 1, 1);
    decide(&e);
    assert_non_null(strstr(e.d[gang].reason, "higher priority"));
    assert_int_equal(e.d[small].action, POL_PLACE);
}

/* An inference job above its minimum gives a replica back to a waiting gang of its priority or
 * higher: the gang holds the free worker and claims the one it lacks */
static void test_gang_waits_for_a_replica_given_back(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 3);
    tenant(&c, "a", 1, -1);
    serving(&c, 0, "a", "j_serve", 1, 1);
    serving(&c, 1, "a", "j_serve", 1, 1);
    int gang = job(&c, "a", 2, 2);
    int train = job(&c, "a", 1, 1);
    int place = job(&c, "a", 1, 1);
    c.j[place].brief = true;
    assert_int_equal(decide(&c), 1);
    assert_int_equal(c.d[gang].action, POL_WAIT);
    assert_non_null(strstr(c.d[gang].reason, "gang incomplete: 1 of 2 workers free"));
    assert_non_null(strstr(c.d[gang].reason, "waiting for inference job j_serve to give back a replica"));
    assert_int_equal(last_claim.priority, 2);
    assert_int_equal(last_claim.workers, 1);
    assert_string_equal(last_claim.job_id, "j0");
    assert_int_equal(c.d[train].action, POL_WAIT); /* it might outlast the replica's return */
    assert_non_null(strstr(c.d[train].reason, "held for job j0"));
    assert_int_equal(c.d[place].action, POL_PLACE); /* short: backfills */
}

/* A gang larger than the cluster is told so at once and holds nothing back (before: it held every
 * free worker forever) */
static void test_gang_larger_than_the_cluster(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 2);
    tenant(&c, "a", 1, -1);
    int gang = job(&c, "a", 1, 3);
    int train = job(&c, "a", 1, 1);
    assert_int_equal(decide(&c), 1);
    assert_int_equal(c.d[gang].action, POL_WAIT);
    assert_non_null(strstr(c.d[gang].reason, "needs 3 workers at once; the cluster has 2"));
    assert_non_null(strstr(c.d[gang].reason, "add 1 worker or cancel it"));
    assert_int_equal(c.d[train].action, POL_PLACE);
    assert_int_equal(last_claim.priority, -1); /* nothing the inference tier could give would help */

    /* the same for a federated job whose sites name no label */
    cluster d = {0};
    workers(&d, 2);
    tenant(&d, "a", 1, -1);
    static const char *any[3] = {NULL, NULL, NULL};
    int f = job(&d, "a", 1, 3);
    d.j[f].sites = any, d.j[f].nsites = 3;
    decide(&d);
    assert_non_null(strstr(d.d[f].reason, "the cluster has 2"));
}

/* Sites that name no label run on any free worker, one per worker, unlabelled workers first;
 * labelled sites keep their workers */
static void test_sites_without_labels(void **state)
{
    (void)state;
    cluster c = {0};
    workers(&c, 5);
    static const char *labels[5] = {"a", NULL, "z", NULL, "b"};
    for (int i = 0; i < 5; i++)
        c.w[i].site = labels[i];
    tenant(&c, "t", 1, -1);
    static const char *sites[] = {NULL, "a", NULL, "b"};
    int f = job(&c, "t", 1, 4);
    c.j[f].sites = sites, c.j[f].nsites = 4;
    assert_int_equal(decide(&c), 1);
    assert_int_equal(c.d[f].action, POL_PLACE);
    assert_int_equal(c.d[f].nworkers, 4);
    assert_int_equal(c.d[f].workers[0], 1); /* unlabelled */
    assert_int_equal(c.d[f].workers[1], 0); /* a */
    assert_int_equal(c.d[f].workers[2], 3); /* unlabelled */
    assert_int_equal(c.d[f].workers[3], 4); /* b */
    assert_true(c.w[2].free);

    /* three unlabelled sites on three unlabelled workers (deploy/examples/federated.json) */
    cluster d = {0};
    workers(&d, 3);
    tenant(&d, "t", 1, -1);
    static const char *any[3] = {NULL, NULL, NULL};
    f = job(&d, "t", 1, 3);
    d.j[f].sites = any, d.j[f].nsites = 3;
    assert_int_equal(decide(&d), 1);
    assert_int_equal(d.d[f].nworkers, 3);
    assert_true(d.d[f].workers[0] != d.d[f].workers[1] && d.d[f].workers[1] != d.d[f].workers[2] &&
                d.d[f].workers[0] != d.d[f].workers[2]);

    /* a labelled site whose worker does not exist: wait, naming the label and what to do */
    cluster e = {0};
    workers(&e, 3);
    tenant(&e, "t", 1, -1);
    static const char *need[3] = {NULL, "x", NULL};
    f = job(&e, "t", 1, 3);
    e.j[f].sites = need, e.j[f].nsites = 3;
    int other = job(&e, "t", 1, 1);
    decide(&e);
    assert_int_equal(e.d[f].action, POL_WAIT);
    assert_non_null(strstr(e.d[f].reason, "no worker labelled site=x"));
    assert_non_null(strstr(e.d[f].reason, "--labels site=x"));
    assert_int_equal(e.d[other].action, POL_PLACE);
}

/* as_yield: inference jobs give back replicas above their minimum to a claim of their priority or
 * higher while the latency model says their SLO holds at the rate they see, and do not grow */
static void test_inference_gives_back_replicas(void **state)
{
    (void)state;
    as_job jobs[2] = {{0.01, 0.1, 0.99, 1, 1, 1, 4}, {0.01, 0.1, 0.99, 1, 1, 1, 4}};
    as_obs obs[2];
    memset(obs, 0, sizeof(obs));
    obs[0].ready = 3, obs[1].ready = 2;
    int prio[2] = {1, 1}, target[2] = {4, 2};
    /* idle: the job with the most to spare gives first; nobody grows into the claimed workers */
    assert_int_equal(as_yield(jobs, obs, prio, 2, 1, 2, target), 2);
    assert_int_equal(target[0] + target[1], 3);
    assert_true(target[0] <= 2 && target[1] >= 1);
    /* never below the minimum */
    target[0] = 3, target[1] = 2;
    assert_int_equal(as_yield(jobs, obs, prio, 2, 1, 9, target), 3);
    assert_int_equal(target[0], 1);
    assert_int_equal(target[1], 1);
    /* no claim: nothing changes */
    target[0] = 4, target[1] = 2;
    assert_int_equal(as_yield(jobs, obs, prio, 2, -1, 0, target), 0);
    assert_int_equal(target[0], 4);
    /* a claim of a lower priority: nothing either */
    prio[0] = prio[1] = 2;
    assert_int_equal(as_yield(jobs, obs, prio, 2, 1, 2, target), 0);
    assert_int_equal(target[0], 4);
    /* busy: 250 req/s at 10 ms need 3 replicas for p99 < 100 ms; job 0 keeps them */
    prio[0] = prio[1] = 1;
    obs[0].arrivals = 250 * AS_TICK_S;
    target[0] = 3, target[1] = 2;
    assert_int_equal(as_yield(jobs, obs, prio, 2, 1, 2, target), 1);
    assert_int_equal(target[0], 3);
    assert_int_equal(target[1], 1);
    /* a job over its SLO now gives nothing */
    obs[1].latency_s = 0.5;
    target[1] = 2;
    assert_int_equal(as_yield(jobs, obs, prio, 2, 1, 2, target), 0);
    assert_int_equal(target[1], 2);
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
        cmocka_unit_test(test_sites_pinned_to_keys),
        cmocka_unit_test(test_backfill_short_jobs_behind_a_gang),
        cmocka_unit_test(test_gang_blocked_by_inference_at_its_minimum),
        cmocka_unit_test(test_gang_waits_for_a_replica_given_back),
        cmocka_unit_test(test_gang_larger_than_the_cluster),
        cmocka_unit_test(test_sites_without_labels),
        cmocka_unit_test(test_inference_gives_back_replicas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
