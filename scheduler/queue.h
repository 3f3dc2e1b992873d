/* queue.h - jobs read from gantry:jobs and not yet placed on a worker.
 * Pure data structure: ordered by priority (high first), then arrival.
 * Linear scans: fine for thousands of queued jobs; the fair-share scheduler of
 * the control-plane issue replaces the ordering.
 * Entries own their stream id, raw task text and decoded task. */
#ifndef GANTRY_SCHED_QUEUE_H
#define GANTRY_SCHED_QUEUE_H

#include <stddef.h>

#include "common/msg.h"

typedef struct {
    char entry_id[64]; /* the gantry:jobs stream id, XACKed once placed */
    char *raw;         /* task JSON as read */
    task_msg task;
    unsigned long long seq; /* arrival order */
    long long arrived_us;   /* when this scheduler read it (monotonic) */
    char waiting[160];      /* the last reason published for its wait ("" = none yet) */
} sched_entry;

typedef struct {
    sched_entry *items;
    size_t len, cap;
    unsigned long long next_seq;
} sched_queue;

void sq_init(sched_queue *q);
/* takes ownership of raw and task; 0, or -1 when out of memory */
int sq_push(sched_queue *q, const char *entry_id, char *raw, task_msg *task);
/* the index of the entry to place next, -1 when empty */
long sq_next(const sched_queue *q);
/* removes entry i and frees what it owns */
void sq_remove(sched_queue *q, size_t i);
void sq_free(sched_queue *q);

#endif
