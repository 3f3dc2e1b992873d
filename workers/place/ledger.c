/* ledger.c - the conservative memory charge (why conservative: ledger.h).
 *
 * An attempt charges devices into a scratch array and records every change
 * to the (producer, device) map in an undo log, so aborting is O(touched). */
#include "workers/place/ledger.h"
#include "workers/place/xfer.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct undo_entry {
    int src, dev;
    int64_t old;
} undo_entry;

struct place_ledger {
    const place_graph *g;
    const int *where;
    int64_t *used;   /* bytes charged per device */
    int64_t *charge; /* bytes the pending attempt adds per device */
    int *touched;    /* devices with a charge in the pending attempt */
    char *is_touched;
    int n_touched;
    uint64_t changed; /* bit (dev % 64) of devices charged by commits */
    place_xfer_acc *acc;
    undo_entry *undo;
    size_t n_undo, cap_undo;
};

place_ledger *place_ledger_new(const place_graph *g, const int *where)
{
    place_ledger *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    size_t D = (size_t)g->n_devices;
    l->g = g;
    l->where = where;
    l->used = calloc(D, sizeof *l->used);
    l->charge = calloc(D, sizeof *l->charge);
    l->touched = calloc(D, sizeof *l->touched);
    l->is_touched = calloc(D, 1);
    l->acc = place_xfer_acc_new(g->n_devices);
    if (!l->used || !l->charge || !l->touched || !l->is_touched || !l->acc) {
        place_ledger_free(l);
        return NULL;
    }
    return l;
}

void place_ledger_free(place_ledger *l)
{
    if (!l) return;
    free(l->used);
    free(l->charge);
    free(l->touched);
    free(l->is_touched);
    free(l->undo);
    place_xfer_acc_free(l->acc);
    free(l);
}

static void charge_dev(place_ledger *l, int dev, int64_t bytes)
{
    if (!l->is_touched[dev]) {
        l->is_touched[dev] = 1;
        l->touched[l->n_touched++] = dev;
    }
    l->charge[dev] += bytes;
}

/* The tensor of `src` is now also consumed on `dev` through an edge of `bytes`. */
static int add_inbound(place_ledger *l, int src, int dev, int64_t bytes)
{
    if (l->n_undo == l->cap_undo) {
        size_t cap = l->cap_undo ? 2 * l->cap_undo : 64;
        undo_entry *u = realloc(l->undo, cap * sizeof *u);
        if (!u) return -1;
        l->undo = u;
        l->cap_undo = cap;
    }
    int64_t old = place_xfer_acc_get(l->acc, src, dev);
    l->undo[l->n_undo++] = (undo_entry){src, dev, old};
    if (place_xfer_acc_set(l->acc, src, dev, old + bytes) < 0) return -1;
    charge_dev(l, dev, place_xfer_bytes(l->g, src, old + bytes) - place_xfer_bytes(l->g, src, old));
    return 0;
}

static int charge_unit(place_ledger *l, const int *ops, int n, int dev)
{
    const place_graph *g = l->g;
    const int *where = l->where;
    for (int i = 0; i < n; i++) {
        int op = ops[i];
        charge_dev(l, dev, place_op_memory(g, op));
        for (int k = g->in_off[op]; k < g->in_off[op + 1]; k++) {
            const place_edge *e = &g->edges[g->in_edge[k]];
            if (where[e->src] >= 0 && where[e->src] != dev && add_inbound(l, e->src, dev, e->bytes) < 0) return -1;
        }
        for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
            const place_edge *e = &g->edges[g->out_edge[k]];
            int to = where[e->dst];
            if (to >= 0 && to != dev && add_inbound(l, op, to, e->bytes) < 0) return -1;
        }
    }
    return 0;
}

static void finish_attempt(place_ledger *l, int keep)
{
    for (int i = 0; i < l->n_touched; i++) {
        int d = l->touched[i];
        if (keep) l->used[d] += l->charge[d], l->changed |= UINT64_C(1) << (d & 63);
        l->charge[d] = 0;
        l->is_touched[d] = 0;
    }
    l->n_touched = 0;
    while (!keep && l->n_undo > 0) {
        undo_entry *u = &l->undo[--l->n_undo];
        place_xfer_acc_set(l->acc, u->src, u->dev, u->old); /* the key exists: cannot fail */
    }
    l->n_undo = 0;
}

void place_ledger_commit(place_ledger *l)
{
    finish_attempt(l, 1);
}

void place_ledger_abort(place_ledger *l)
{
    finish_attempt(l, 0);
}

int64_t place_unit_memory(const place_graph *g, const int *ops, int n)
{
    int64_t own = 0;
    for (int i = 0; i < n; i++)
        own += place_op_memory(g, ops[i]);
    return own;
}

int place_ledger_try(place_ledger *l, const int *ops, int n, int dev, place_miss *miss)
{
    const place_graph *g = l->g;
    if (charge_unit(l, ops, n, dev) < 0) {
        place_ledger_abort(l);
        return -1;
    }
    int over = dev;
    int64_t worst = INT64_MIN;
    for (int i = 0; i < l->n_touched; i++) {
        int d = l->touched[i];
        int64_t excess = l->used[d] + l->charge[d] - g->devices[d].memory_bytes;
        if (excess > worst) worst = excess, over = d;
    }
    if (worst <= 0) return 1;
    if (miss && (miss->dev < 0 || worst < miss->missing)) {
        int64_t own = place_unit_memory(g, ops, n);
        *miss = (place_miss){dev, over, worst, l->charge[dev], l->charge[dev] - own, g->devices[over].memory_bytes - l->used[over]};
    }
    place_ledger_abort(l);
    return 0;
}

uint64_t place_ledger_touched_mask(const place_ledger *l)
{
    uint64_t m = 0;
    for (int i = 0; i < l->n_touched; i++)
        m |= UINT64_C(1) << (l->touched[i] & 63);
    return m;
}

uint64_t place_ledger_take_changed(place_ledger *l)
{
    uint64_t m = l->changed;
    l->changed = 0;
    return m;
}

int64_t place_ledger_free_bytes(const place_ledger *l, int dev)
{
    return l->g->devices[dev].memory_bytes - l->used[dev];
}

void place_ledger_reserve(place_ledger *l, int dev, int64_t bytes)
{
    l->used[dev] += bytes;
}

void place_miss_explain(const place_graph *g, const int *ops, int n, const place_miss *m, char *reason, size_t len)
{
    char who[PLACE_MAX_NAME * 2 + 64], inbound[96] = "";
    int first = ops[0], grp = g->ops[first].group;
    if (grp >= 0 && n > 1)
        snprintf(who, sizeof who, "op '%s' (group '%s', %d ops)", g->ops[first].name, g->group_names[grp], n);
    else
        snprintf(who, sizeof who, "op '%s'", g->ops[first].name);
    if (m->dev < 0) {
        snprintf(reason, len, "%s could not be placed", who);
        return;
    }
    if (m->over_dev != m->dev) {
        snprintf(reason, len, "%s fits on no device: on '%s' the tensors it sends would overflow '%s' (missing %lld bytes)", who,
                 g->devices[m->dev].name, g->devices[m->over_dev].name, (long long)m->missing);
        return;
    }
    if (m->inbound > 0)
        snprintf(inbound, sizeof inbound, " (including %lld bytes of inputs from other devices)", (long long)m->inbound);
    snprintf(reason, len, "%s needs %lld bytes%s but the largest free device memory is %lld bytes on '%s' (missing %lld bytes)",
             who, (long long)m->need, inbound, (long long)m->free_bytes, g->devices[m->dev].name, (long long)m->missing);
}
