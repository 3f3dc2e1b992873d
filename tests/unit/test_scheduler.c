/* test_scheduler.c - unit tests for scheduler/queue: ordering, removal, freeing, the lists of
 * same-shaped jobs, the window a round looks at, the rolling sweep, and that the policy decides the
 * same on the window as on the whole queue (randomized). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/policy.h"
#include "scheduler/queue.h"

/* pushes a task for job `job` with a malloc'd raw text and a spec to own */
static sched_entry *push_task(sched_queue *q, const char *job, const char *tenant, const char *type, int prio, int slots,
                              json_t *spec)
{
    task_msg t;
    memset(&t, 0, sizeof(t));
    snprintf(t.job_id, sizeof(t.job_id), "%s", job);
    snprintf(t.tenant, sizeof(t.tenant), "%s", tenant);
    snprintf(t.type, sizeof(t.type), "%s", type);
    t.priority = prio;
    t.slots = slots;
    t.spec = spec;
    assert_non_null(t.spec);
    char entry[64], *raw = malloc(64);
    assert_non_null(raw);
    snprintf(entry, sizeof(entry), "1-%s", job);
    snprintf(raw, 64, "{\"job_id\":\"%s\"}", job);
    size_t len = q->len;
    sq_push(q, entry, raw, &t);
    /* ownership moved into the queue */
    assert_null(t.spec);
    assert_int_equal(t.job_id[0], '\0');
    assert_int_equal(q->len, len + 1);
    assert_string_equal(q->newest->task.job_id, job);
    return q->newest;
}

static sched_entry *push(sched_queue *q, const char *job, int prio)
{
    return push_task(q, job, "t_a", "placement", prio, 1, json_pack("{s:s}", "job", job));
}

/* pops the next entry, checks its job id, removes it */
static void expect_next(sched_queue *q, const char *job)
{
    sched_entry *e = sq_next(q);
    assert_non_null(e);
    assert_string_equal(e->task.job_id, job);
    char entry[64];
    snprintf(entry, sizeof(entry), "1-%s", job);
    assert_string_equal(e->entry_id, entry);
    assert_non_null(strstr(e->raw, job));
    assert_string_equal(json_string_value(json_object_get(e->task.spec, "job")), job);
    sq_remove(q, e);
}

/* the whole queue in arrival order, as job ids joined by spaces */
static void arrival_order(const sched_queue *q, char *out, size_t len)
{
    out[0] = '\0';
    size_t n = 0;
    for (const sched_entry *e = q->oldest; e; e = e->newer) {
        n += (size_t)snprintf(out + n, len - n, "%s%s", n ? " " : "", e->task.job_id);
        assert_true(n < len);
        assert_true(!e->newer || e->newer->seq > e->seq);
        assert_true(e->newer ? e->newer->older == e : q->newest == e);
    }
}

static void test_empty(void **state)
{
    (void)state;
    sched_queue q;
    sq_init(&q);
    assert_int_equal(q.len, 0);
    assert_null(sq_next(&q));
    size_t n = 99;
    assert_null(sq_window(&q, 4, NULL, NULL, &n));
    assert_int_equal(n, 0);
    sq_free(&q);
    assert_null(sq_next(&q));
}

static void test_priority_then_fifo(void **state)
{
    (void)state;
    sched_queue q;
    sq_init(&q);
    push(&q, "n1", 1);
    push(&q, "l1", 0);
    push(&q, "h1", 2);
    push(&q, "n2", 1);
    push(&q, "h2", 2);
    push(&q, "l2", 0);
    push(&q, "n3", 1);
    assert_int_equal(q.len, 7);
    assert_int_equal(q.nlists, 3); /* one list per priority class here */
    const char *order[] = {"h1", "h2", "n1", "n2", "n3", "l1", "l2"};
    for (size_t k = 0; k < 7; k++) {
        expect_next(&q, order[k]);
        assert_int_equal(q.len, 6 - k);
    }
    assert_null(sq_next(&q));
    assert_int_equal(q.nlists, 0); /* empty lists go */
    sq_free(&q);
}

static void test_arrival_after_removal(void **state)
{
    (void)state;
    sched_queue q;
    sq_init(&q);
    push(&q, "a", 1);
    push(&q, "b", 1);
    expect_next(&q, "a");
    push(&q, "c", 1); /* arrives after b: b still goes first */
    push(&q, "d", 2);
    expect_next(&q, "d");
    expect_next(&q, "b");
    expect_next(&q, "c");
    assert_int_equal(q.len, 0);
    sq_free(&q);
}

static void test_remove_middle_keeps_order(void **state)
{
    (void)state;
    sched_queue q;
    sq_init(&q);
    const char *jobs[] = {"j0", "j1", "j2", "j3", "j4"};
    sched_entry *e[5];
    for (size_t k = 0; k < 5; k++)
        e[k] = push(&q, jobs[k], 1);
    char order[256];
    /* remove j2 from the middle, then the last, then the first */
    sq_remove(&q, e[2]);
    assert_int_equal(q.len, 4);
    arrival_order(&q, order, sizeof(order));
    assert_string_equal(order, "j0 j1 j3 j4");
    sq_remove(&q, e[4]);
    sq_remove(&q, e[0]);
    assert_int_equal(q.len, 2);
    arrival_order(&q, order, sizeof(order));
    assert_string_equal(order, "j1 j3");
    expect_next(&q, "j1");
    expect_next(&q, "j3");
    assert_null(sq_next(&q));
    assert_null(q.oldest);
    assert_null(q.newest);
    sq_free(&q);
}

static void test_grow_and_free_with_items(void **state)
{
    (void)state;
    sched_queue q;
    sq_init(&q);
    char job[32], tenant[32];
    for (int k = 0; k < 1500; k++) {
        snprintf(job, sizeof(job), "j%04d", k);
        snprintf(tenant, sizeof(tenant), "t%d", k % 50); /* 50 tenants x 3 classes: the hash table grows */
        push_task(&q, job, tenant, "placement", k % 3, 1, json_pack("{s:s}", "job", job));
    }
    assert_int_equal(q.len, 1500);
    assert_int_equal(q.nlists, 150);
    /* the first high-priority job (k == 2) comes first */
    sched_entry *e = sq_next(&q);
    assert_non_null(e);
    assert_string_equal(e->task.job_id, "j0002");
    sq_free(&q); /* frees every raw text and spec (checked by the sanitizer run) */
    assert_int_equal(q.len, 0);
    assert_int_equal(q.nlists, 0);
    assert_null(q.oldest);
    /* the queue is reusable after sq_free */
    push(&q, "again", 0);
    expect_next(&q, "again");
    sq_free(&q);
}

/* a federated spec's site, pinned to workers labelled site=NAME */
static json_t *site(const char *name)
{
    char label[64];
    snprintf(label, sizeof(label), "site=%s", name);
    return json_pack("{s:s, s:s}", "name", name, "label", label);
}

static json_t *sites_spec(const char *a, const char *b)
{
    return json_pack("{s:[o, o]}", "sites", site(a), site(b));
}

/* jobs of one tenant, class, type, slot count and sites share a list; any difference makes another */
static void test_lists_by_shape(void **state)
{
    (void)state;
    sched_queue q;
    sq_init(&q);
    push_task(&q, "a1", "t_a", "placement", 1, 1, json_object());
    push_task(&q, "a2", "t_a", "placement", 1, 1, json_object());
    push_task(&q, "b1", "t_b", "placement", 1, 1, json_object());
    push_task(&q, "c1", "t_a", "placement", 2, 1, json_object());
    push_task(&q, "d1", "t_a", "training", 1, 1, json_object());
    push_task(&q, "e1", "t_a", "training", 1, 2, json_pack("{s:{s:i, s:i}}", "workers", "min", 2, "max", 4));
    sched_entry *f1 = push_task(&q, "f1", "t_a", "federated", 1, 2, sites_spec("x", "y"));
    push_task(&q, "f2", "t_a", "federated", 1, 2, sites_spec("x", "z"));
    sched_entry *f3 = push_task(&q, "f3", "t_a", "federated", 1, 2, sites_spec("x", "y"));
    assert_int_equal(q.len, 9);
    assert_int_equal(q.nlists, 7);
    assert_ptr_equal(f1->list, f3->list);
    assert_int_equal(f1->list->len, 2);
    assert_ptr_equal(f1->list->head, f1);
    assert_ptr_equal(f1->next, f3);
    assert_int_equal(f1->nsites, 2);
    assert_string_equal(f1->sites[1], "y");
    assert_int_equal(q.newest->max_slots, 0);
    sched_entry *e1 = f1->older;
    assert_string_equal(e1->task.job_id, "e1");
    assert_int_equal(e1->max_slots, 4); /* decoded once, at arrival */
    assert_null(e1->sites);
    sq_free(&q);
}

static bool odd_uncounted(const sched_entry *e, void *arg)
{
    (void)arg;
    return e->seq % 2 == 1;
}

/* the window: from the head of every list, up to per_list counted entries, in order */
static void test_window(void **state)
{
    (void)state;
    sched_queue q;
    sq_init(&q);
    char job[16];
    for (int k = 0; k < 10; k++) {
        snprintf(job, sizeof(job), "a%d", k);
        push_task(&q, job, "t_a", "placement", 1, 1, json_object());
        snprintf(job, sizeof(job), "b%d", k);
        push_task(&q, job, "t_b", "placement", 1, 1, json_object());
    }
    push_task(&q, "c0", "t_c", "placement", 1, 1, json_object());
    size_t n;
    sched_entry **w = sq_window(&q, 3, NULL, NULL, &n);
    assert_non_null(w);
    assert_int_equal(n, 7); /* 3 + 3 + 1 */
    int a = 0, b = 0, c = 0;
    for (size_t i = 0; i < n; i++) {
        const char *id = w[i]->task.job_id;
        char want[16];
        if (id[0] == 'a') snprintf(want, sizeof(want), "a%d", a++);
        if (id[0] == 'b') snprintf(want, sizeof(want), "b%d", b++);
        if (id[0] == 'c') snprintf(want, sizeof(want), "c%d", c++);
        assert_string_equal(id, want); /* each list from its head, in arrival order */
    }
    free(w);
    /* entries that do not count are taken as well: a's seqs are even, b's odd */
    w = sq_window(&q, 3, odd_uncounted, NULL, &n);
    assert_int_equal(n, 3 + 10 + 1);
    free(w);
    sq_free(&q);
}

/* the rolling sweep visits every entry in turn, a slice at a time, and survives removals */
static void test_sweep(void **state)
{
    (void)state;
    sched_queue q;
    sq_init(&q);
    char job[16];
    sched_entry *e[10];
    for (int k = 0; k < 10; k++) {
        snprintf(job, sizeof(job), "s%d", k);
        e[k] = push_task(&q, job, k % 2 ? "t_a" : "t_b", "placement", k % 3, 1, json_object());
    }
    sched_entry *out[16];
    assert_int_equal(sq_sweep(&q, 4, out), 4);
    assert_ptr_equal(out[0], e[0]);
    assert_ptr_equal(out[3], e[3]);
    sq_remove(&q, e[4]); /* where the cursor stands */
    assert_int_equal(sq_sweep(&q, 4, out), 4);
    assert_ptr_equal(out[0], e[5]);
    assert_ptr_equal(out[3], e[8]);
    assert_int_equal(sq_sweep(&q, 4, out), 4); /* wraps */
    assert_ptr_equal(out[0], e[9]);
    assert_ptr_equal(out[1], e[0]);
    assert_int_equal(sq_sweep(&q, 16, out), 9); /* never more than the queue */
    sq_free(&q);
    assert_int_equal(sq_sweep(&q, 4, out), 0);
}

/* ---- the policy on the window decides as on the whole queue ---- */

static unsigned rnd_state = 12345;
static unsigned rnd(unsigned n)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return (rnd_state >> 8) % n;
}

#define RJ 400
#define RW 10

static const char *tenant_ids[] = {"t0", "t1", "t2", "t3"};
static const char *site_names[] = {"sa", "sb", "sc", "sz"};

typedef struct {
    bool hold, may_hold;
} job_flags;

static job_flags flags[RJ];

static bool test_may_hold(const sched_entry *e, void *arg)
{
    (void)arg;
    return flags[atoi(e->task.job_id + 1)].may_hold;
}

static pol_job job_of(const sched_entry *e)
{
    const task_msg *t = &e->task;
    return (pol_job){t->job_id,
                     t->tenant,
                     t->priority,
                     t->slots,
                     e->max_slots,
                     flags[atoi(t->job_id + 1)].hold,
                     e->seq,
                     e->sites,
                     e->sites ? e->nsites : 0,
                     strcmp(t->type, "placement") == 0, /* as main.c: placement jobs are brief (backfill) */
                     e->sites ? e->site_keys : NULL};
}

/* one random cluster and queue; returns how many jobs the window left out */
static size_t compare_once(void)
{
    pol_tenant tenants[4];
    int nt = 1 + (int)rnd(4);
    static const double weights[] = {0.5, 1, 2, 3};
    for (int i = 0; i < nt; i++)
        tenants[i] = (pol_tenant){tenant_ids[i], weights[rnd(4)], rnd(3) ? -1 : (int)rnd(7)};
    pol_worker w0[RW], w1[RW];
    int nw = (int)rnd(RW + 1);
    static const char *serving_ids[] = {"inf0", "inf1"};
    for (int i = 0; i < nw; i++) {
        bool busy = rnd(2), serving = busy && rnd(3) == 0;
        w0[i] = (pol_worker){!busy,
                             busy ? tenant_ids[rnd(4)] : NULL,
                             serving ? serving_ids[rnd(2)]
                             : busy  ? "running"
                                     : NULL,
                             (int)rnd(3),
                             rnd(2),
                             rnd(100),
                             rnd(3) ? NULL : site_names[rnd(3)],
                             serving,
                             serving ? 1 + (int)rnd(2) : 0,
                             NULL};
    }
    sched_queue q;
    sq_init(&q);
    int nj = 1 + (int)rnd(RJ);
    int kinds = 1 + (int)rnd(5); /* few kinds of jobs: long lists */
    for (int j = 0; j < nj; j++) {
        char id[16];
        snprintf(id, sizeof(id), "j%d", j);
        int kind = (int)rnd((unsigned)kinds), prio = (int)rnd(2) + (rnd(6) == 0), slots = 1 + (rnd(4) == 0) * (int)rnd(4);
        /* now and then a tenant without settings (weight 1, no quota) */
        const char *tenant = tenant_ids[rnd((unsigned)nt + (nt < 4 && rnd(8) == 0))];
        json_t *spec = json_object();
        const char *type = kind == 0 ? "placement" : kind == 1 ? "training" : kind == 2 ? "inference" : "placement";
        if (kind == 3) { /* an elastic gang */
            type = "training";
            json_object_set_new(spec, "workers", json_pack("{s:i, s:i}", "min", slots, "max", slots + 1 + (int)rnd(3)));
        } else if (kind == 4) { /* federated: sites pinned to labelled workers, or on any worker */
            type = "federated";
            json_t *sites = json_array();
            for (int k = 0; k < slots; k++)
                json_array_append_new(sites, rnd(3) ? site(site_names[rnd(4)]) : json_pack("{s:s}", "name", "any"));
            json_object_set_new(spec, "sites", sites);
        }
        flags[j].may_hold = rnd(15) == 0;
        flags[j].hold = flags[j].may_hold && rnd(2);
        push_task(&q, id, tenant, type, prio, slots, spec);
    }
    /* the whole queue, as the scheduler gave it to the policy before */
    static pol_job all[RJ];
    static pol_decision d_all[RJ], d_win[RJ];
    pol_preemption p_all[RW], p_win[RW];
    int n = 0;
    for (sched_entry *e = q.oldest; e; e = e->newer)
        all[n++] = job_of(e);
    memcpy(w1, w0, sizeof(w0));
    int np_all = 0, np_win = 0;
    memset(d_all, 0, sizeof(d_all));
    pol_claim c_all, c_win;
    int placed_all = policy_decide_claim(all, n, w0, nw, tenants, nt, d_all, p_all, &np_all, &c_all);

    /* the window, as main.c takes it: as many counted entries per list as free workers plus one */
    size_t nfree = 0, nwin = 0;
    for (int i = 0; i < nw; i++)
        nfree += w1[i].free;
    sched_entry **win = sq_window(&q, nfree + 1, test_may_hold, NULL, &nwin);
    assert_non_null(win);
    static pol_job part[RJ];
    for (size_t i = 0; i < nwin; i++)
        part[i] = job_of(win[i]);
    memset(d_win, 0, sizeof(d_win));
    int placed_win = policy_decide_claim(part, (int)nwin, w1, nw, tenants, nt, d_win, p_win, &np_win, &c_win);

    assert_int_equal(placed_win, placed_all);
    for (int i = 0; i < nw; i++)
        assert_int_equal(w1[i].free, w0[i].free);
    /* the same preemptions, for the same jobs */
    assert_int_equal(np_win, np_all);
    for (int p = 0; p < np_all; p++) {
        assert_int_equal(p_win[p].worker, p_all[p].worker);
        assert_string_equal(part[p_win[p].for_job].job_id, all[p_all[p].for_job].job_id);
    }
    /* the same claim on the inference tier */
    assert_int_equal(c_win.priority, c_all.priority);
    assert_int_equal(c_win.workers, c_all.workers);
    if (c_all.job_id) assert_string_equal(c_win.job_id, c_all.job_id);
    assert_true(!c_win.job_id == !c_all.job_id);
    /* every job of the window gets the decision and the reason it got from the whole queue */
    int placed_seen = 0;
    for (size_t i = 0; i < nwin; i++) {
        int k = atoi(part[i].job_id + 1); /* arrival index: all[k] */
        assert_string_equal(all[k].job_id, part[i].job_id);
        if (d_win[i].action != d_all[k].action || (d_all[k].action == POL_WAIT && strcmp(d_win[i].reason, d_all[k].reason) != 0))
            fail_msg("job %s: whole queue %s '%s', window %s '%s'", part[i].job_id, d_all[k].action == POL_PLACE ? "place" : "wait",
                     d_all[k].reason, d_win[i].action == POL_PLACE ? "place" : "wait", d_win[i].reason);
        assert_int_equal(d_win[i].nworkers, d_all[k].nworkers);
        for (int x = 0; x < d_all[k].nworkers; x++)
            assert_int_equal(d_win[i].workers[x], d_all[k].workers[x]);
        placed_seen += d_all[k].action == POL_PLACE;
    }
    assert_int_equal(placed_seen, placed_all); /* nothing behind a window was placed */
    free(win);
    sq_free(&q);
    return (size_t)n - nwin;
}

static void test_window_decides_as_whole_queue(void **state)
{
    (void)state;
    size_t left_out = 0;
    for (int round = 0; round < 3000; round++)
        left_out += compare_once();
    assert_true(left_out > 10000); /* the windows did leave most jobs out */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_priority_then_fifo),
        cmocka_unit_test(test_arrival_after_removal),
        cmocka_unit_test(test_remove_middle_keeps_order),
        cmocka_unit_test(test_grow_and_free_with_items),
        cmocka_unit_test(test_lists_by_shape),
        cmocka_unit_test(test_window),
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_window_decides_as_whole_queue),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
