/* sim.c - discrete-event replay of a plan (model in sim.h).
 *
 * Events sit in a binary heap ordered by time, then kind, then creation.  At
 * equal times the events that free memory (op ends, transfer ends) come
 * before those that allocate (transfer starts), and ops start only once
 * every event of that instant has been handled, so a peak is never
 * overstated by an allocation that in truth follows a free.
 *
 * Every transfer the plan needs (one per producer and remote device that
 * consumes it) is known from the placement alone, so they are built up
 * front.  Without a transfer sequence in the plan, a producer's transfers
 * reserve both channels when it ends (in device order), in the order
 * producers end: first come first served.  With one, each channel keeps a
 * cursor into its part of the sequence and a transfer starts when its
 * producer has ended and it is next on both of its channels; this replays a
 * list scheduler's own channel reservations exactly.  Cost: O((N + E) log N). */
#include "workers/place/sim.h"

#include "common/alloc.h"
#include "workers/place/xfer.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EV_OP_END, EV_XFER_END, EV_XFER_START };

typedef struct event {
    double t;
    int kind, id;
    int64_t seq;
} event;

typedef struct sim {
    const place_graph *g;
    const place_plan *plan;
    place_sim_result *r;
    int flags;
    int *qoff, *queue, *next; /* per device: its ops in plan order, next to run */
    int *running;             /* per device: op running, -1 when idle */
    int *pending;             /* per op: input edges not yet available */
    int *out_refs;            /* per op: local consumer edges + transfers still holding its output */
    int *edge_xfer;           /* per edge: the transfer feeding it, -1 when local */
    int *xoff;                /* per op: its transfers are r->xfers[xoff[op] .. xoff[op+1]) */
    int *xrefs;               /* per transfer: consumer edges on the receiver not yet run */
    /* a plan's transfer sequence: per device, its send and receive parts */
    int *soff, *sseq, *spos, *roff, *rseq, *rpos;
    int64_t *mem;
    double *send_free, *recv_free;
    int *cap_mem; /* per device: capacity of r->mem[d] */
    event *heap;
    size_t n_heap, cap_heap;
    int64_t seq;
    int *wake; /* devices to try starting an op on at this instant */
    char *woken;
    int n_wake, done;
} sim;

/* ---- event heap ---- */

static int ev_before(const event *a, const event *b)
{
    if (a->t != b->t) return a->t < b->t;
    if (a->kind != b->kind) return a->kind < b->kind;
    return a->seq < b->seq;
}

static int push(sim *s, double t, int kind, int id)
{
    if (s->n_heap == s->cap_heap) {
        size_t cap = s->cap_heap ? 2 * s->cap_heap : 256;
        s->heap = xreallocarray(s->heap, cap, sizeof *s->heap);
        s->cap_heap = cap;
    }
    event ev = {t, kind, id, s->seq++};
    size_t i = s->n_heap++;
    while (i > 0 && ev_before(&ev, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = ev;
    return 0;
}

static event pop(sim *s)
{
    event top = s->heap[0], last = s->heap[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && ev_before(&s->heap[c + 1], &s->heap[c])) c++;
        if (!ev_before(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n > 0) s->heap[i] = last;
    return top;
}

/* ---- memory ---- */

/* Records the level of `dev` at t (one point per instant). */
static int trace_mem(sim *s, int dev, double t)
{
    place_sim_result *r = s->r;
    int n = r->n_mem[dev];
    if (n > 0 && r->mem[dev][n - 1].t_us == t) {
        r->mem[dev][n - 1].bytes = s->mem[dev];
        return 0;
    }
    if (n == s->cap_mem[dev]) {
        int cap = n ? 2 * n : 64;
        r->mem[dev] = xreallocarray(r->mem[dev], (size_t)cap, sizeof *r->mem[dev]);
        s->cap_mem[dev] = cap;
    }
    r->mem[dev][r->n_mem[dev]++] = (place_mem_point){t, s->mem[dev]};
    return 0;
}

static int mem_change(sim *s, int dev, int64_t delta, double t)
{
    place_sim_result *r = s->r;
    const place_device *d = &s->g->devices[dev];
    s->mem[dev] += delta;
    if (s->mem[dev] > r->peak_bytes[dev]) r->peak_bytes[dev] = s->mem[dev];
    if (delta > 0 && s->mem[dev] > d->memory_bytes && r->feasible) {
        r->feasible = 0;
        snprintf(r->reason, sizeof r->reason, "device '%s' needs %lld bytes at t=%.3f us but has %lld (over by %lld bytes)",
                 d->name, (long long)s->mem[dev], t, (long long)d->memory_bytes, (long long)(s->mem[dev] - d->memory_bytes));
    }
    return (s->flags & PLACE_SIM_MEMORY) ? trace_mem(s, dev, t) : 0;
}

/* One holder of op's output is done with it. */
static int release_output(sim *s, int op, double t)
{
    if (--s->out_refs[op] > 0) return 0;
    return mem_change(s, s->plan->device[op], -s->g->ops[op].output_bytes, t);
}

static void wake(sim *s, int dev)
{
    if (s->woken[dev]) return;
    s->woken[dev] = 1;
    s->wake[s->n_wake++] = dev;
}

/* ---- transfers ---- */

static int start_xfer(sim *s, int x, double t)
{
    place_sim_xfer *xf = &s->r->xfers[x];
    double end = t + place_comm_time(s->g, xf->from, xf->to, xf->bytes);
    xf->start_us = t;
    xf->end_us = end;
    s->send_free[xf->from] = s->recv_free[xf->to] = end;
    if (push(s, t, EV_XFER_START, x) < 0) return -1;
    return push(s, end, EV_XFER_END, x);
}

/* Sequenced channels: starts x if its producer ended and it is next on both. */
static int try_xfer(sim *s, int x, double t)
{
    const place_sim_xfer *xf = &s->r->xfers[x];
    if (xf->start_us >= 0 || s->r->end_us[xf->src] < 0) return 0;
    int f = xf->from, to = xf->to;
    if (s->spos[f] >= s->soff[f + 1] || s->sseq[s->spos[f]] != x) return 0;
    if (s->rpos[to] >= s->roff[to + 1] || s->rseq[s->rpos[to]] != x) return 0;
    return start_xfer(s, x, t);
}

/* op ended at t: its tensor leaves for every remote device that reads it. */
static int send_output(sim *s, int op, double t)
{
    for (int x = s->xoff[op]; x < s->xoff[op + 1]; x++) {
        const place_sim_xfer *xf = &s->r->xfers[x];
        if (s->sseq) {
            if (try_xfer(s, x, t) < 0) return -1;
            continue;
        }
        double start = t;
        if (s->send_free[xf->from] > start) start = s->send_free[xf->from];
        if (s->recv_free[xf->to] > start) start = s->recv_free[xf->to];
        if (start_xfer(s, x, start) < 0) return -1;
    }
    return 0;
}

/* ---- ops ---- */

static int try_start(sim *s, int dev, double t)
{
    if (s->running[dev] >= 0 || s->next[dev] == s->qoff[dev + 1]) return 0;
    int op = s->queue[s->next[dev]];
    if (s->pending[op] > 0) return 0;
    s->next[dev]++;
    s->running[dev] = op;
    s->r->start_us[op] = t;
    if (mem_change(s, dev, s->g->ops[op].output_bytes + s->g->ops[op].temp_bytes, t) < 0) return -1;
    return push(s, t + place_op_time(s->g, op, dev), EV_OP_END, op);
}

static int on_op_end(sim *s, int op, double t)
{
    const place_graph *g = s->g;
    const int *where = s->plan->device;
    int dev = where[op];
    place_sim_result *r = s->r;
    r->end_us[op] = t;
    r->busy_us[dev] += place_op_time(g, op, dev);
    if (t > r->makespan_us) r->makespan_us = t;
    s->running[dev] = -1;
    s->done++;
    int rc = mem_change(s, dev, -g->ops[op].temp_bytes, t);
    for (int k = g->in_off[op]; k < g->in_off[op + 1] && rc == 0; k++) {
        int e = g->in_edge[k], src = g->edges[e].src;
        if (where[src] == dev) {
            rc = release_output(s, src, t);
            continue;
        }
        int x = s->edge_xfer[e];
        if (--s->xrefs[x] == 0) rc = mem_change(s, dev, -r->xfers[x].bytes, t);
    }
    for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
        int dst = g->edges[g->out_edge[k]].dst;
        if (where[dst] == dev) s->pending[dst]--;
    }
    wake(s, dev);
    /* An output nobody consumes keeps out_refs at 0 and is never released. */
    return rc < 0 ? -1 : send_output(s, op, t);
}

static int on_xfer_start(sim *s, const place_sim_xfer *xf, double t)
{
    s->r->transfers++;
    s->r->transfer_bytes += xf->bytes;
    return mem_change(s, xf->to, xf->bytes, t);
}

static int on_xfer_end(sim *s, int x, double t)
{
    const place_graph *g = s->g;
    const place_sim_xfer *xf = &s->r->xfers[x];
    for (int k = g->out_off[xf->src]; k < g->out_off[xf->src + 1]; k++) {
        int dst = g->edges[g->out_edge[k]].dst;
        if (s->plan->device[dst] == xf->to) s->pending[dst]--;
    }
    wake(s, xf->to);
    if (release_output(s, xf->src, t) < 0) return -1;
    if (!s->sseq) return 0;
    int f = xf->from, to = xf->to;
    s->spos[f]++, s->rpos[to]++;
    if (s->spos[f] < s->soff[f + 1] && try_xfer(s, s->sseq[s->spos[f]], t) < 0) return -1;
    if (s->rpos[to] < s->roff[to + 1] && try_xfer(s, s->rseq[s->rpos[to]], t) < 0) return -1;
    return 0;
}

/* ---- setup ---- */

/* Marks the replay infeasible with a reason; returns rc. */
static int plan_error(place_sim_result *r, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int plan_error(place_sim_result *r, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
    r->feasible = 0;
    return rc;
}

/* Devices in range and order a permutation: else the plan is malformed. */
static int check_plan(const place_graph *g, const place_plan *p, place_sim_result *r)
{
    if (p->n_ops != g->n_ops) return plan_error(r, -1, "plan has a different number of ops than the graph");
    char *seen = xcalloc((size_t)g->n_ops, 1);
    int rc = 0;
    for (int i = 0; i < g->n_ops && rc == 0; i++) {
        int op = p->order[i];
        if (p->device[i] < 0 || p->device[i] >= g->n_devices)
            rc = plan_error(r, -1, "op '%s' has no valid device", g->ops[i].name);
        else if (op < 0 || op >= g->n_ops || seen[op])
            rc = plan_error(r, -1, "plan order is not a permutation of the ops");
        else
            seen[op] = 1;
    }
    free(seen);
    return rc;
}

static int build_queues(sim *s)
{
    const place_graph *g = s->g;
    const place_plan *p = s->plan;
    int D = g->n_devices, *fill = xcalloc((size_t)D, sizeof *fill);
    int *pos = xmalloc((size_t)g->n_ops * sizeof *pos);
    for (int i = 0; i < g->n_ops; i++) {
        s->qoff[p->device[i] + 1]++;
        pos[p->order[i]] = i;
    }
    for (int d = 0; d < D; d++)
        s->qoff[d + 1] += s->qoff[d];
    for (int i = 0; i < g->n_ops; i++) {
        int op = p->order[i], d = p->device[op];
        s->queue[s->qoff[d] + fill[d]++] = op;
    }
    for (int d = 0; d < D; d++)
        s->next[d] = s->qoff[d];
    int rc = 0;
    for (int e = 0; e < g->n_edges && rc == 0; e++) {
        const place_edge *ed = &g->edges[e];
        int d = p->device[ed->src];
        if (d == p->device[ed->dst] && pos[ed->src] > pos[ed->dst])
            rc = plan_error(s->r, 1, "op '%s' is ordered before its input '%s' on device '%s'", g->ops[ed->dst].name,
                            g->ops[ed->src].name, g->devices[d].name);
    }
    free(fill);
    free(pos);
    return rc;
}

static int cmp_int(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* Every (producer, remote consumer device) pair, grouped by producer in
 * device order, sized by xfer.h; edges point at the transfer feeding them. */
static int build_xfers(sim *s)
{
    const place_graph *g = s->g;
    const int *where = s->plan->device;
    int D = g->n_devices, n = 0;
    int64_t *sum = xcalloc((size_t)D, sizeof *sum);
    int *stamp = xmalloc((size_t)D * sizeof *stamp), *targets = xmalloc((size_t)D * sizeof *targets);
    int *index = xmalloc((size_t)D * sizeof *index);
    for (int d = 0; d < D; d++)
        stamp[d] = -1;
    for (int op = 0; op < g->n_ops; op++) {
        int nt = 0;
        s->xoff[op] = n;
        for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
            const place_edge *e = &g->edges[g->out_edge[k]];
            int to = where[e->dst];
            if (to == where[op]) continue;
            if (stamp[to] != op) stamp[to] = op, sum[to] = 0, targets[nt++] = to;
            sum[to] += e->bytes;
        }
        qsort(targets, (size_t)nt, sizeof *targets, cmp_int);
        for (int i = 0; i < nt; i++) {
            int d = targets[i];
            s->r->xfers[n] = (place_sim_xfer){op, where[op], d, place_xfer_bytes(g, op, sum[d]), -1, -1};
            s->out_refs[op]++;
            index[d] = n++;
        }
        for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
            int e = g->out_edge[k], to = where[g->edges[e].dst];
            if (to == where[op]) continue;
            s->edge_xfer[e] = index[to];
            s->xrefs[index[to]]++;
        }
    }
    s->xoff[g->n_ops] = s->r->n_xfers = n;
    free(sum), free(stamp), free(targets), free(index);
    return 0;
}

/* The transfer for (src, dev) among src's, or -1. */
static int find_xfer(const sim *s, int src, int dev)
{
    for (int x = s->xoff[src]; x < s->xoff[src + 1]; x++)
        if (s->r->xfers[x].to == dev) return x;
    return -1;
}

/* Splits the plan's transfer sequence into per-channel parts; 1 when the
 * sequence does not list every needed transfer exactly once. */
static int build_sequence(sim *s)
{
    const place_graph *g = s->g;
    const place_plan *p = s->plan;
    place_sim_result *r = s->r;
    size_t D = (size_t)g->n_devices, X = (size_t)(r->n_xfers ? r->n_xfers : 1);
    s->soff = xcalloc(D + 1, sizeof(int)), s->roff = xcalloc(D + 1, sizeof(int));
    s->sseq = xmalloc(X * sizeof(int)), s->rseq = xmalloc(X * sizeof(int));
    s->spos = xmalloc(D * sizeof(int)), s->rpos = xmalloc(D * sizeof(int));
    int *seen = xcalloc(X, sizeof(int));
    int rc = 0;
    for (int k = 0; k < p->n_xfers && rc == 0; k++) {
        int src = p->xfer_src[k], dev = p->xfer_dev[k];
        int x = src >= 0 && src < g->n_ops && dev >= 0 && dev < g->n_devices ? find_xfer(s, src, dev) : -1;
        if (x < 0 || seen[x]++)
            rc = plan_error(r, 1, "transfer sequence entry %d (%s -> device %d) is %s", k,
                            src >= 0 && src < g->n_ops ? g->ops[src].name : "?", dev,
                            x < 0 ? "not a transfer the placement needs" : "listed twice");
    }
    for (int x = 0; x < r->n_xfers && rc == 0; x++)
        if (!seen[x])
            rc = plan_error(r, 1, "transfer sequence misses '%s' -> '%s'", g->ops[r->xfers[x].src].name,
                            g->devices[r->xfers[x].to].name);
    for (int k = 0; k < p->n_xfers && rc == 0; k++) {
        const place_sim_xfer *xf = &r->xfers[find_xfer(s, p->xfer_src[k], p->xfer_dev[k])];
        s->soff[xf->from + 1]++, s->roff[xf->to + 1]++;
    }
    for (size_t d = 0; d < D && rc == 0; d++) {
        s->soff[d + 1] += s->soff[d], s->roff[d + 1] += s->roff[d];
        s->spos[d] = s->soff[d], s->rpos[d] = s->roff[d];
    }
    for (int k = 0; k < p->n_xfers && rc == 0; k++) {
        int x = find_xfer(s, p->xfer_src[k], p->xfer_dev[k]);
        s->sseq[s->spos[r->xfers[x].from]++] = x;
        s->rseq[s->rpos[r->xfers[x].to]++] = x;
    }
    for (size_t d = 0; d < D && rc == 0; d++)
        s->spos[d] = s->soff[d], s->rpos[d] = s->roff[d];
    free(seen);
    return rc;
}

static void sim_free(sim *s)
{
    free(s->qoff), free(s->queue), free(s->next), free(s->running);
    free(s->pending), free(s->out_refs), free(s->edge_xfer), free(s->xoff), free(s->xrefs);
    free(s->soff), free(s->sseq), free(s->spos), free(s->roff), free(s->rseq), free(s->rpos);
    free(s->mem), free(s->send_free), free(s->recv_free), free(s->cap_mem), free(s->heap);
    free(s->wake), free(s->woken);
}

static int sim_init(sim *s, const place_graph *g, const place_plan *p, place_sim_result *r, int flags)
{
    size_t N = (size_t)g->n_ops, E = (size_t)(g->n_edges ? g->n_edges : 1), D = (size_t)g->n_devices;
    *s = (sim){.g = g, .plan = p, .r = r, .flags = flags};
    s->qoff = xcalloc(D + 1, sizeof(int)), s->queue = xmalloc(N * sizeof(int)), s->next = xmalloc(D * sizeof(int));
    s->running = xmalloc(D * sizeof(int)), s->pending = xmalloc(N * sizeof(int)), s->out_refs = xcalloc(N, sizeof(int));
    s->edge_xfer = xmalloc(E * sizeof(int)), s->xoff = xmalloc((N + 1) * sizeof(int)), s->xrefs = xcalloc(E, sizeof(int));
    s->mem = xcalloc(D, sizeof(int64_t)), s->cap_mem = xcalloc(D, sizeof(int));
    s->send_free = xcalloc(D, sizeof(double)), s->recv_free = xcalloc(D, sizeof(double));
    s->wake = xmalloc(D * sizeof(int)), s->woken = xcalloc(D, 1);
    r->xfers = xcalloc(E, sizeof *r->xfers); /* build_xfers fills the first n_xfers (the analyser cannot follow it there) */
    for (size_t d = 0; d < D; d++)
        s->running[d] = -1;
    for (size_t e = 0; e < (size_t)g->n_edges; e++)
        s->edge_xfer[e] = -1;
    for (int i = 0; i < g->n_ops; i++) {
        s->pending[i] = g->in_off[i + 1] - g->in_off[i];
        for (int k = g->out_off[i]; k < g->out_off[i + 1]; k++)
            if (p->device[g->edges[g->out_edge[k]].dst] == p->device[i]) s->out_refs[i]++;
    }
    if (build_xfers(s) < 0) return -1;
    return p->n_xfers > 0 ? build_sequence(s) : 0;
}

static int result_init(place_sim_result *r, const place_graph *g, int flags)
{
    size_t N = (size_t)g->n_ops, D = (size_t)g->n_devices;
    memset(r, 0, sizeof *r);
    r->feasible = 1;
    r->n_devices = g->n_devices;
    r->busy_us = xcalloc(D, sizeof *r->busy_us);
    r->peak_bytes = xcalloc(D, sizeof *r->peak_bytes);
    r->ops = xcalloc(D, sizeof *r->ops);
    r->start_us = xmalloc(N * sizeof *r->start_us);
    r->end_us = xmalloc(N * sizeof *r->end_us);
    if (flags & PLACE_SIM_MEMORY) {
        r->mem = xcalloc(D, sizeof *r->mem);
        r->n_mem = xcalloc(D, sizeof *r->n_mem);
    }
    for (size_t i = 0; i < N; i++)
        r->start_us[i] = r->end_us[i] = -1;
    return 0;
}

/* ---- the replay ---- */

static int handle(sim *s, event ev)
{
    if (ev.kind == EV_OP_END) return on_op_end(s, ev.id, ev.t);
    if (ev.kind == EV_XFER_START) return on_xfer_start(s, &s->r->xfers[ev.id], ev.t);
    return on_xfer_end(s, ev.id, ev.t);
}

/* Wakes devices and starts what can start at time t. */
static int start_ready(sim *s, double t)
{
    int rc = 0;
    for (int i = 0; i < s->n_wake; i++) {
        int d = s->wake[i];
        s->woken[d] = 0;
        if (rc == 0) rc = try_start(s, d, t);
    }
    s->n_wake = 0;
    return rc;
}

static int run(sim *s)
{
    const place_graph *g = s->g;
    int64_t *resident = xcalloc((size_t)g->n_devices, sizeof *resident);
    for (int i = 0; i < g->n_ops; i++) {
        int d = s->plan->device[i];
        s->r->ops[d]++;
        resident[d] += g->ops[i].persistent_bytes;
    }
    int rc = 0;
    for (int d = 0; d < g->n_devices && rc == 0; d++) {
        rc = mem_change(s, d, resident[d], 0);
        wake(s, d);
    }
    free(resident);
    if (rc < 0 || start_ready(s, 0) < 0) return -1;
    while (s->n_heap > 0) {
        double t = s->heap[0].t;
        while (s->n_heap > 0 && s->heap[0].t == t)
            if (handle(s, pop(s)) < 0) return -1;
        if (start_ready(s, t) < 0) return -1;
    }
    if (s->done == g->n_ops) return 0;
    for (int i = 0; i < g->n_ops; i++) {
        int op = s->plan->order[i];
        if (s->r->start_us[op] >= 0) continue;
        plan_error(s->r, 0, "plan deadlocks: op '%s' on device '%s' never gets its inputs", g->ops[op].name,
                   g->devices[s->plan->device[op]].name);
        break;
    }
    return 0;
}

int place_simulate_ex(const place_graph *g, const place_plan *plan, place_sim_result *out, int flags)
{
    if (result_init(out, g, flags) < 0) return plan_error(out, -1, "out of memory");
    if (check_plan(g, plan, out) < 0) return -1;
    sim s;
    int rc = sim_init(&s, g, plan, out, flags);
    if (rc == 0) rc = build_queues(&s);
    if (rc == 0) rc = run(&s);
    if (rc < 0 && out->feasible) plan_error(out, -1, "out of memory");
    if (rc > 0) rc = 0; /* an invalid order: infeasible, reason set */
    sim_free(&s);
    return rc;
}

int place_simulate(const place_graph *g, const place_plan *plan, place_sim_result *out)
{
    return place_simulate_ex(g, plan, out, 0);
}

void place_sim_result_clear(place_sim_result *r)
{
    free(r->busy_us);
    free(r->peak_bytes);
    free(r->ops);
    free(r->start_us);
    free(r->end_us);
    free(r->xfers);
    for (int d = 0; r->mem && d < r->n_devices; d++)
        free(r->mem[d]);
    free(r->mem);
    free(r->n_mem);
    memset(r, 0, sizeof *r);
}
