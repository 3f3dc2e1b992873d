/* sim.c - discrete-event replay of a plan (model in sim.h).
 *
 * Events sit in a binary heap ordered by time, then kind, then creation.  At
 * equal times the events that free memory (op ends, transfer ends) come
 * before those that allocate (transfer starts), and ops start only once
 * every event of that instant has been handled, so a peak is never
 * overstated by an allocation that in truth follows a free.  Transfers
 * reserve both channels when their producer ends, in the order producers
 * end (first come first served), so a transfer starts when its tensor is
 * ready and both channels are free.  Cost: O((N + E) log N) plus, per
 * producer, one pass over its out-edges per device that receives it. */
#include "workers/place/sim.h"
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

typedef struct xfer {
    int src, to;
    int64_t bytes;
    int refs; /* consumer edges on `to` that have not yet run */
} xfer;

typedef struct sim {
    const place_graph *g;
    const place_plan *plan;
    place_sim_result *r;
    int *qoff, *queue, *next; /* per device: its ops in plan order, next to run */
    int *running;             /* per device: op running, -1 when idle */
    int *pending;             /* per op: input edges not yet available */
    int *out_refs;            /* per op: local consumer edges + transfers still holding its output */
    int *edge_xfer;           /* per edge: the transfer feeding it, -1 when local */
    xfer *xfers;
    int n_xfers;
    int64_t *mem;
    double *send_free, *recv_free;
    event *heap;
    size_t n_heap, cap_heap;
    int64_t seq;
    int64_t *dev_sum; /* scratch per device: edge bytes to consumers there */
    int *dev_stamp;   /* scratch per device: producer that last wrote dev_sum */
    int *targets;     /* scratch: devices receiving the current producer */
    int *wake;        /* devices to try starting an op on at this instant */
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
        event *h = realloc(s->heap, cap * sizeof *h);
        if (!h) return -1;
        s->heap = h;
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

static void mem_alloc(sim *s, int dev, int64_t bytes, double t)
{
    place_sim_result *r = s->r;
    const place_device *d = &s->g->devices[dev];
    s->mem[dev] += bytes;
    if (s->mem[dev] > r->peak_bytes[dev]) r->peak_bytes[dev] = s->mem[dev];
    if (s->mem[dev] <= d->memory_bytes || !r->feasible) return;
    r->feasible = 0;
    snprintf(r->reason, sizeof r->reason, "device '%s' needs %lld bytes at t=%.3f us but has %lld (over by %lld bytes)", d->name,
             (long long)s->mem[dev], t, (long long)d->memory_bytes, (long long)(s->mem[dev] - d->memory_bytes));
}

/* One holder of op's output is done with it. */
static void release_output(sim *s, int op)
{
    if (--s->out_refs[op] == 0) s->mem[s->plan->device[op]] -= s->g->ops[op].output_bytes;
}

static void wake(sim *s, int dev)
{
    if (s->woken[dev]) return;
    s->woken[dev] = 1;
    s->wake[s->n_wake++] = dev;
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
    mem_alloc(s, dev, s->g->ops[op].output_bytes + s->g->ops[op].temp_bytes, t);
    return push(s, t + place_op_time(s->g, op, dev), EV_OP_END, op);
}

static int cmp_int(const void *a, const void *b)
{
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

/* Starts one transfer of op's output per device that consumes it remotely. */
static int send_output(sim *s, int op, double t)
{
    const place_graph *g = s->g;
    const int *where = s->plan->device;
    int from = where[op], n_targets = 0;
    for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
        const place_edge *e = &g->edges[g->out_edge[k]];
        int to = where[e->dst];
        if (to == from) continue;
        if (s->dev_stamp[to] != op) {
            s->dev_stamp[to] = op;
            s->dev_sum[to] = 0;
            s->targets[n_targets++] = to;
        }
        s->dev_sum[to] += e->bytes;
    }
    qsort(s->targets, (size_t)n_targets, sizeof *s->targets, cmp_int);
    for (int i = 0; i < n_targets; i++) {
        int to = s->targets[i], x = s->n_xfers++;
        xfer *xf = &s->xfers[x];
        *xf = (xfer){op, to, place_xfer_bytes(g, op, s->dev_sum[to]), 0};
        double start = t;
        if (s->send_free[from] > start) start = s->send_free[from];
        if (s->recv_free[to] > start) start = s->recv_free[to];
        double end = start + place_comm_time(g, from, to, xf->bytes);
        s->send_free[from] = s->recv_free[to] = end;
        s->out_refs[op]++;
        for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
            int e = g->out_edge[k];
            if (where[g->edges[e].dst] != to) continue;
            s->edge_xfer[e] = x;
            xf->refs++;
        }
        if (push(s, start, EV_XFER_START, x) < 0 || push(s, end, EV_XFER_END, x) < 0) return -1;
    }
    return 0;
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
    s->mem[dev] -= g->ops[op].temp_bytes;
    for (int k = g->in_off[op]; k < g->in_off[op + 1]; k++) {
        int e = g->in_edge[k], src = g->edges[e].src;
        if (where[src] == dev) {
            release_output(s, src);
            continue;
        }
        xfer *xf = &s->xfers[s->edge_xfer[e]];
        if (--xf->refs == 0) s->mem[dev] -= xf->bytes;
    }
    for (int k = g->out_off[op]; k < g->out_off[op + 1]; k++) {
        int dst = g->edges[g->out_edge[k]].dst;
        if (where[dst] == dev) s->pending[dst]--;
    }
    wake(s, dev);
    /* An output nobody consumes keeps out_refs at 0 and is never released. */
    return send_output(s, op, t);
}

static void on_xfer_start(sim *s, const xfer *xf, double t)
{
    s->r->transfers++;
    s->r->transfer_bytes += xf->bytes;
    mem_alloc(s, xf->to, xf->bytes, t);
}

static void on_xfer_end(sim *s, const xfer *xf)
{
    const place_graph *g = s->g;
    for (int k = g->out_off[xf->src]; k < g->out_off[xf->src + 1]; k++) {
        int dst = g->edges[g->out_edge[k]].dst;
        if (s->plan->device[dst] == xf->to) s->pending[dst]--;
    }
    wake(s, xf->to);
    release_output(s, xf->src);
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
    char *seen = calloc((size_t)g->n_ops, 1);
    if (!seen) return plan_error(r, -1, "out of memory");
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
    int D = g->n_devices, *fill = calloc((size_t)D, sizeof *fill);
    int *pos = malloc((size_t)g->n_ops * sizeof *pos);
    if (!fill || !pos) return free(fill), free(pos), -1;
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

static void sim_free(sim *s)
{
    free(s->qoff), free(s->queue), free(s->next), free(s->running);
    free(s->pending), free(s->out_refs), free(s->edge_xfer), free(s->xfers);
    free(s->mem), free(s->send_free), free(s->recv_free), free(s->heap);
    free(s->dev_sum), free(s->dev_stamp), free(s->targets), free(s->wake), free(s->woken);
}

static int sim_init(sim *s, const place_graph *g, const place_plan *p, place_sim_result *r)
{
    size_t N = (size_t)g->n_ops, E = (size_t)(g->n_edges ? g->n_edges : 1), D = (size_t)g->n_devices;
    *s = (sim){.g = g, .plan = p, .r = r};
    s->qoff = calloc(D + 1, sizeof(int)), s->queue = malloc(N * sizeof(int)), s->next = malloc(D * sizeof(int));
    s->running = malloc(D * sizeof(int)), s->pending = malloc(N * sizeof(int)), s->out_refs = calloc(N, sizeof(int));
    s->edge_xfer = malloc(E * sizeof(int)), s->xfers = malloc(E * sizeof(xfer)), s->mem = calloc(D, sizeof(int64_t));
    s->send_free = calloc(D, sizeof(double)), s->recv_free = calloc(D, sizeof(double));
    s->dev_sum = calloc(D, sizeof(int64_t)), s->dev_stamp = malloc(D * sizeof(int)), s->targets = malloc(D * sizeof(int));
    s->wake = malloc(D * sizeof(int)), s->woken = calloc(D, 1);
    if (!s->qoff || !s->queue || !s->next || !s->running || !s->pending || !s->out_refs || !s->edge_xfer || !s->xfers || !s->mem ||
        !s->send_free || !s->recv_free || !s->dev_sum || !s->dev_stamp || !s->targets || !s->wake || !s->woken)
        return -1;
    for (size_t d = 0; d < D; d++)
        s->running[d] = s->dev_stamp[d] = -1;
    for (size_t e = 0; e < (size_t)g->n_edges; e++)
        s->edge_xfer[e] = -1;
    for (int i = 0; i < g->n_ops; i++) {
        s->pending[i] = g->in_off[i + 1] - g->in_off[i];
        for (int k = g->out_off[i]; k < g->out_off[i + 1]; k++)
            if (p->device[g->edges[g->out_edge[k]].dst] == p->device[i]) s->out_refs[i]++;
    }
    return 0;
}

static int result_init(place_sim_result *r, const place_graph *g)
{
    size_t N = (size_t)g->n_ops, D = (size_t)g->n_devices;
    memset(r, 0, sizeof *r);
    r->feasible = 1;
    r->n_devices = g->n_devices;
    r->busy_us = calloc(D, sizeof *r->busy_us);
    r->peak_bytes = calloc(D, sizeof *r->peak_bytes);
    r->ops = calloc(D, sizeof *r->ops);
    r->start_us = malloc(N * sizeof *r->start_us);
    r->end_us = malloc(N * sizeof *r->end_us);
    if (!r->busy_us || !r->peak_bytes || !r->ops || !r->start_us || !r->end_us) return -1;
    for (size_t i = 0; i < N; i++)
        r->start_us[i] = r->end_us[i] = -1;
    return 0;
}

/* ---- the replay ---- */

static int handle(sim *s, event ev)
{
    if (ev.kind == EV_OP_END) return on_op_end(s, ev.id, ev.t);
    if (ev.kind == EV_XFER_START)
        on_xfer_start(s, &s->xfers[ev.id], ev.t);
    else
        on_xfer_end(s, &s->xfers[ev.id]);
    return 0;
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
    for (int i = 0; i < g->n_ops; i++) {
        int d = s->plan->device[i];
        s->r->ops[d]++;
        s->mem[d] += g->ops[i].persistent_bytes;
    }
    for (int d = 0; d < g->n_devices; d++) {
        mem_alloc(s, d, 0, 0);
        wake(s, d);
    }
    if (start_ready(s, 0) < 0) return -1;
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

int place_simulate(const place_graph *g, const place_plan *plan, place_sim_result *out)
{
    if (result_init(out, g) < 0) return plan_error(out, -1, "out of memory");
    if (check_plan(g, plan, out) < 0) return -1;
    sim s;
    int rc = sim_init(&s, g, plan, out);
    if (rc == 0) rc = build_queues(&s);
    if (rc == 0) rc = run(&s);
    if (rc < 0 && out->feasible) plan_error(out, -1, "out of memory");
    if (rc > 0) rc = 0; /* an invalid order: infeasible, reason set */
    sim_free(&s);
    return rc;
}

void place_sim_result_clear(place_sim_result *r)
{
    free(r->busy_us);
    free(r->peak_bytes);
    free(r->ops);
    free(r->start_us);
    free(r->end_us);
    memset(r, 0, sizeof *r);
}
