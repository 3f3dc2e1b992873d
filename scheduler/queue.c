#include "scheduler/queue.h"
#include "common/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sq_init(sched_queue *q)
{
    memset(q, 0, sizeof(*q));
}

int sq_push(sched_queue *q, const char *entry_id, char *raw, task_msg *task)
{
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        sched_entry *items = realloc(q->items, cap * sizeof(*items));
        if (!items) return -1;
        q->items = items;
        q->cap = cap;
    }
    sched_entry *e = &q->items[q->len++];
    memset(e, 0, sizeof(*e));
    snprintf(e->entry_id, sizeof(e->entry_id), "%s", entry_id);
    e->raw = raw;
    e->task = *task;
    e->seq = q->next_seq++;
    e->arrived_us = clock_mono_us();
    memset(task, 0, sizeof(*task));
    return 0;
}

long sq_next(const sched_queue *q)
{
    long best = -1;
    for (size_t i = 0; i < q->len; i++) {
        const sched_entry *e = &q->items[i], *b = best >= 0 ? &q->items[best] : NULL;
        if (!b || e->task.priority > b->task.priority || (e->task.priority == b->task.priority && e->seq < b->seq)) best = (long)i;
    }
    return best;
}

void sq_remove(sched_queue *q, size_t i)
{
    free(q->items[i].raw);
    msg_task_clear(&q->items[i].task);
    memmove(&q->items[i], &q->items[i + 1], (q->len - i - 1) * sizeof(q->items[0]));
    q->len--;
}

void sq_free(sched_queue *q)
{
    while (q->len)
        sq_remove(q, q->len - 1);
    free(q->items);
    sq_init(q);
}
