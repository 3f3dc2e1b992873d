/* queue.h - jobs read from gantry:jobs and not yet placed on a worker, indexed so that a round of
 * decisions costs the same with 100 or 100,000 jobs queued.
 *
 * Every entry is in one list, in arrival order, of the jobs that share a shape: the same priority
 * class, tenant, type (placement jobs may backfill: policy.h), slot count and sites (a federated job's
 * site labels).  The policy (policy.h) treats two jobs of one list alike, so it only ever needs the first few of each list:
 * sq_window takes, from the head of every list, as many entries as one round can place plus one (docs/control-plane.md, "How the
 * queue is indexed", says why nothing behind them can change what a round decides). Entries are also linked in arrival order over
 * the whole queue (recovery, sweeps). Push, remove, and finding an entry's list are O(1); nothing here walks the whole queue except
 * sq_free.  Entries own their stream id, raw task text and decoded task. */
#ifndef GANTRY_SCHED_QUEUE_H
#define GANTRY_SCHED_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

#include "wire/msg.h"

#define SQ_MAX_SITES 64 /* a federated job with more sites than this is not pinned (policy.h POL_MAX_GANG) */

typedef struct sq_list sq_list;

typedef struct sched_entry {
    char entry_id[64]; /* the gantry:jobs stream id, XACKed once placed */
    char *raw;         /* task JSON as read */
    task_msg task;
    unsigned long long seq; /* arrival order */
    long long arrived_us;   /* when this scheduler read it (monotonic) */
    char waiting[160];      /* the last reason published for its wait ("" = none yet) */
    /* decoded once from the spec, not on every round */
    int max_slots;      /* an elastic gang's spec.workers.max (0: not elastic) */
    const char **sites; /* a federated job's sites: NAME of spec.sites[k].label "site=NAME", NULL for any worker
                           (borrowed from task.spec); NULL: not a federated job */
    int nsites;
    const char **site_keys; /* spec.sites[k].public_key, NULL for none (nsites entries; NULL: no site pinned) */
    /* links */
    sq_list *list;
    struct sched_entry *prev, *next;   /* in its list */
    struct sched_entry *older, *newer; /* in the whole queue */
} sched_entry;

struct sq_list {
    int priority, slots;
    char tenant[MSG_ID_LEN];
    char type[16];
    char *sites_key; /* the site names joined ("" for none) */
    unsigned hash;
    sched_entry *head, *tail;
    size_t len;
    sq_list *prev, *next; /* every list, in creation order */
    sq_list *chain;       /* hash bucket */
};

typedef struct {
    sched_entry *oldest, *newest;
    size_t len;
    sq_list *lists;
    size_t nlists;
    sq_list **buckets;
    size_t nbuckets;
    unsigned long long next_seq;
    sched_entry *cursor; /* where the next rolling sweep starts (main.c's cancellation sweep) */
} sched_queue;

void sq_init(sched_queue *q);
/* takes ownership of raw and task (the new entry is q->newest) */
void sq_push(sched_queue *q, const char *entry_id, char *raw, task_msg *task);
/* the entry to place next by priority, then arrival (the head of one list); NULL when empty */
sched_entry *sq_next(const sched_queue *q);
/* unlinks e and frees what it owns */
void sq_remove(sched_queue *q, sched_entry *e);
void sq_free(sched_queue *q);

/* The entries a round looks at: from the head of every list, in order, up to per_list of them that
 * `uncounted` (may be NULL) says count; entries it says do not count are taken as well.  Returns a
 * malloc'd array (NULL when the queue is empty) and its length in *n. */
sched_entry **sq_window(const sched_queue *q, size_t per_list, bool (*uncounted)(const sched_entry *e, void *arg), void *arg,
                        size_t *n);

/* up to max entries from the rolling cursor on (wrapping to the oldest), in arrival order; the cursor
 * moves past them.  Returns how many were written to out. */
size_t sq_sweep(sched_queue *q, size_t max, sched_entry **out);

#endif
