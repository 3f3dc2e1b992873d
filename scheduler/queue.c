/* queue.c - the queued jobs read from Redis, indexed for a round of decisions (queue.h). */
#include "scheduler/queue.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/jobtypes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sq_init(sched_queue *q)
{
    memset(q, 0, sizeof(*q));
}

static unsigned hash_key(int priority, int slots, const char *tenant, const char *type, const char *sites_key)
{
    unsigned h = 2166136261u;
    unsigned char head[8] = {(unsigned char)priority,
                             (unsigned char)(priority >> 8),
                             (unsigned char)slots,
                             (unsigned char)(slots >> 8),
                             (unsigned char)(slots >> 16),
                             0,
                             0,
                             0};
    for (size_t i = 0; i < sizeof(head); i++)
        h = (h ^ head[i]) * 16777619u;
    for (const char *s = tenant; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    h = (h ^ 0xff) * 16777619u;
    for (const char *s = type; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    h = (h ^ 0xff) * 16777619u;
    for (const char *s = sites_key; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* the spec's members the policy needs, decoded once; *sites_key: the sites' labels as one key (new) */
static void decode_shape(sched_entry *e, char **sites_key)
{
    const task_msg *t = &e->task;
    json_t *w = json_object_get(t->spec, "workers"); /* {"min","max"}: an elastic gang */
    e->max_slots = json_is_object(w) ? (int)json_integer_value(json_object_get(w, "max")) : 0;
    *sites_key = NULL;
    json_t *sites = job_type_traits(t->type) & JT_PER_SITE ? json_object_get(t->spec, "sites") : NULL;
    size_t n = json_is_array(sites) ? json_array_size(sites) : 0, keylen = 1;
    if (json_is_array(sites) && n <= SQ_MAX_SITES) { /* each site on its own labelled worker */
        e->sites = xmalloc(sizeof(char *) * (n + 1));
        for (size_t k = 0; k < n; k++) {
            /* pinned by its label site=NAME (policy.h); NULL: any worker */
            const char *label = json_string_value(json_object_get(json_array_get(sites, k), "label"));
            e->sites[k] = label && strncmp(label, "site=", 5) == 0 ? label + 5 : label;
            keylen += (e->sites[k] ? strlen(e->sites[k]) : 1) + 1;
            /* pinned to a worker's identity key (policy.h) */
            const char *key = json_string_value(json_object_get(json_array_get(sites, k), "public_key"));
            if (key && !e->site_keys) e->site_keys = xcalloc(n + 1, sizeof(char *));
            if (key) e->site_keys[k] = key, keylen += strlen(key) + 1;
        }
        e->nsites = (int)n;
    }
    *sites_key = xcalloc(1, keylen);
    for (int k = 0; k < e->nsites; k++) {
        strcat(*sites_key, e->sites[k] ? e->sites[k] : "\x1e"); /* any worker: not the same as a label "site=" */
        if (e->site_keys && e->site_keys[k]) strcat(*sites_key, "\x1d"), strcat(*sites_key, e->site_keys[k]);
        strcat(*sites_key, "\x1f");
    }
}

static void grow_buckets(sched_queue *q)
{
    size_t n = q->nbuckets ? q->nbuckets * 2 : 64;
    sq_list **b = xcalloc(n, sizeof(*b));
    for (sq_list *l = q->lists; l; l = l->next) {
        l->chain = b[l->hash & (n - 1)];
        b[l->hash & (n - 1)] = l;
    }
    free(q->buckets);
    q->buckets = b;
    q->nbuckets = n;
}

/* the list of this shape, created when missing (takes sites_key either way) */
static sq_list *list_for(sched_queue *q, const task_msg *t, char *sites_key)
{
    unsigned h = hash_key(t->priority, t->slots, t->tenant, t->type, sites_key);
    for (sq_list *l = q->nbuckets ? q->buckets[h & (q->nbuckets - 1)] : NULL; l; l = l->chain)
        if (l->hash == h && l->priority == t->priority && l->slots == t->slots && strcmp(l->tenant, t->tenant) == 0 &&
            strcmp(l->type, t->type) == 0 && strcmp(l->sites_key, sites_key) == 0) {
            free(sites_key);
            return l;
        }
    if (q->nlists >= q->nbuckets) grow_buckets(q);
    sq_list *l = xcalloc(1, sizeof(*l));
    l->priority = t->priority;
    l->slots = t->slots;
    snprintf(l->tenant, sizeof(l->tenant), "%s", t->tenant);
    snprintf(l->type, sizeof(l->type), "%s", t->type);
    l->sites_key = sites_key;
    l->hash = h;
    l->chain = q->buckets[h & (q->nbuckets - 1)];
    q->buckets[h & (q->nbuckets - 1)] = l;
    l->next = q->lists;
    if (q->lists) q->lists->prev = l;
    q->lists = l;
    q->nlists++;
    return l;
}

static void list_free(sched_queue *q, sq_list *l)
{
    sq_list **p = &q->buckets[l->hash & (q->nbuckets - 1)];
    while (*p != l)
        p = &(*p)->chain;
    *p = l->chain;
    if (l->prev)
        l->prev->next = l->next;
    else
        q->lists = l->next;
    if (l->next) l->next->prev = l->prev;
    q->nlists--;
    free(l->sites_key);
    free(l);
}

void sq_push(sched_queue *q, const char *entry_id, char *raw, task_msg *task)
{
    sched_entry *e = xcalloc(1, sizeof(*e));
    snprintf(e->entry_id, sizeof(e->entry_id), "%s", entry_id);
    e->task = *task;
    char *sites_key;
    decode_shape(e, &sites_key);
    sq_list *l = list_for(q, task, sites_key); /* takes sites_key */
    memset(task, 0, sizeof(*task));
    e->raw = raw;
    e->seq = q->next_seq++;
    e->arrived_us = clock_mono_us();
    e->list = l;
    e->prev = l->tail;
    if (l->tail)
        l->tail->next = e;
    else
        l->head = e;
    l->tail = e;
    l->len++;
    e->older = q->newest;
    if (q->newest)
        q->newest->newer = e;
    else
        q->oldest = e;
    q->newest = e;
    q->len++;
}

sched_entry *sq_next(const sched_queue *q)
{
    sched_entry *best = NULL;
    for (const sq_list *l = q->lists; l; l = l->next) {
        const sched_entry *e = l->head;
        if (!best || e->task.priority > best->task.priority || (e->task.priority == best->task.priority && e->seq < best->seq))
            best = l->head;
    }
    return best;
}

void sq_remove(sched_queue *q, sched_entry *e)
{
    sq_list *l = e->list;
    if (e->prev)
        e->prev->next = e->next;
    else
        l->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        l->tail = e->prev;
    if (--l->len == 0) list_free(q, l);
    if (q->cursor == e) q->cursor = e->newer;
    if (e->older)
        e->older->newer = e->newer;
    else
        q->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        q->newest = e->older;
    q->len--;
    free(e->raw);
    free(e->sites), free(e->site_keys);
    msg_task_clear(&e->task);
    free(e);
}

void sq_free(sched_queue *q)
{
    for (sched_entry *e = q->oldest, *newer; e; e = newer) {
        newer = e->newer;
        sq_remove(q, e);
    }
    free(q->buckets);
    sq_init(q);
}

sched_entry **sq_window(const sched_queue *q, size_t per_list, bool (*uncounted)(const sched_entry *e, void *arg), void *arg,
                        size_t *n)
{
    *n = 0;
    size_t cap = 0;
    sched_entry **out = NULL;
    for (const sq_list *l = q->lists; l; l = l->next) {
        size_t counted = 0;
        for (sched_entry *e = l->head; e && counted < per_list; e = e->next) {
            if (*n == cap) {
                size_t c = cap ? cap * 2 : 64;
                out = xreallocarray(out, c, sizeof(*out));
                cap = c;
            }
            out[(*n)++] = e;
            if (!uncounted || !uncounted(e, arg)) counted++;
        }
    }
    return out;
}

size_t sq_sweep(sched_queue *q, size_t max, sched_entry **out)
{
    size_t n = 0, want = max < q->len ? max : q->len;
    while (n < want) {
        if (!q->cursor) q->cursor = q->oldest; /* from the start again once a pass reached the newest */
        out[n++] = q->cursor;
        q->cursor = q->cursor->newer;
    }
    return n;
}
