/* test_scheduler.c - unit tests for scheduler/queue: ordering, removal, freeing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/queue.h"

/* pushes a task for job `job` at priority `prio`, with a malloc'd raw text and a spec to own */
static void push(sched_queue *q, const char *job, int prio)
{
    task_msg t;
    memset(&t, 0, sizeof(t));
    snprintf(t.job_id, sizeof(t.job_id), "%s", job);
    snprintf(t.tenant, sizeof(t.tenant), "t_a");
    snprintf(t.type, sizeof(t.type), "placement");
    t.priority = prio;
    t.slots = 1;
    t.spec = json_pack("{s:s}", "job", job);
    assert_non_null(t.spec);
    char entry[64], *raw = malloc(64);
    assert_non_null(raw);
    snprintf(entry, sizeof(entry), "1-%s", job);
    snprintf(raw, 64, "{\"job_id\":\"%s\"}", job);
    assert_int_equal(sq_push(q, entry, raw, &t), 0);
    /* ownership moved into the queue */
    assert_null(t.spec);
    assert_int_equal(t.job_id[0], '\0');
}

/* pops the next entry, checks its job id, removes it */
static void expect_next(sched_queue *q, const char *job)
{
    long i = sq_next(q);
    assert_true(i >= 0);
    assert_true((size_t)i < q->len);
    assert_string_equal(q->items[i].task.job_id, job);
    char entry[64];
    snprintf(entry, sizeof(entry), "1-%s", job);
    assert_string_equal(q->items[i].entry_id, entry);
    assert_non_null(strstr(q->items[i].raw, job));
    assert_string_equal(json_string_value(json_object_get(q->items[i].task.spec, "job")), job);
    sq_remove(q, (size_t)i);
}

static void test_empty(void **state)
{
    (void)state;
    sched_queue q;
    sq_init(&q);
    assert_int_equal(q.len, 0);
    assert_int_equal(sq_next(&q), -1);
    sq_free(&q);
    assert_int_equal(sq_next(&q), -1);
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
    const char *order[] = {"h1", "h2", "n1", "n2", "n3", "l1", "l2"};
    for (size_t k = 0; k < 7; k++) {
        expect_next(&q, order[k]);
        assert_int_equal(q.len, 6 - k);
    }
    assert_int_equal(sq_next(&q), -1);
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
    for (size_t k = 0; k < 5; k++)
        push(&q, jobs[k], 1);
    /* remove j2 from the middle, then the last, then the first */
    assert_string_equal(q.items[2].task.job_id, "j2");
    sq_remove(&q, 2);
    assert_int_equal(q.len, 4);
    assert_string_equal(q.items[0].task.job_id, "j0");
    assert_string_equal(q.items[1].task.job_id, "j1");
    assert_string_equal(q.items[2].task.job_id, "j3");
    assert_string_equal(q.items[3].task.job_id, "j4");
    sq_remove(&q, 3);
    sq_remove(&q, 0);
    assert_int_equal(q.len, 2);
    expect_next(&q, "j1");
    expect_next(&q, "j3");
    assert_int_equal(sq_next(&q), -1);
    sq_free(&q);
}

static void test_grow_and_free_with_items(void **state)
{
    (void)state;
    sched_queue q;
    sq_init(&q);
    /* more than the initial capacity (64), so the array is reallocated */
    char job[32];
    for (int k = 0; k < 150; k++) {
        snprintf(job, sizeof(job), "j%03d", k);
        push(&q, job, k % 3);
    }
    assert_int_equal(q.len, 150);
    assert_true(q.cap >= 150);
    /* the first high-priority job (k == 2) comes first */
    long i = sq_next(&q);
    assert_true(i >= 0);
    assert_string_equal(q.items[i].task.job_id, "j002");
    /* sequence numbers are unique and increasing in arrival order */
    for (size_t k = 1; k < q.len; k++)
        assert_true(q.items[k].seq > q.items[k - 1].seq);
    sq_free(&q); /* frees every raw text and spec (checked by the sanitizer run) */
    assert_int_equal(q.len, 0);
    assert_int_equal(q.cap, 0);
    assert_null(q.items);
    /* the queue is reusable after sq_free */
    push(&q, "again", 0);
    expect_next(&q, "again");
    sq_free(&q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_priority_then_fifo),
        cmocka_unit_test(test_arrival_after_removal),
        cmocka_unit_test(test_remove_middle_keeps_order),
        cmocka_unit_test(test_grow_and_free_with_items),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
