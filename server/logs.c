/* logs.c - GET /v1/jobs/{id}/logs?rank=R&tail=N[&follow=1] (logs.h).
 *
 * The tail reads the stream backwards, LOGS_PAGE entries at a time, splitting each chunk into lines from
 * its end, until it holds N lines of the ranks asked for, the stream's start, or LOGS_SCAN_BYTES read
 * (a rank that printed nothing for a long time while others wrote megabytes is not searched for ever).
 * The lines are then given oldest first, "[rank R] " before each when no rank was asked for and the job
 * has more than one rank (its spec allows several, or the stream holds several).
 *
 * A follow sends that tail as events, then reads forwards from the newest entry the tail saw (nothing
 * is lost or sent twice between the two), one XRANGE per follower every LOGS_POLL_MS while its client
 * keeps up (sse_pending).  Events: "log" (data: one line as the tail gives it), "end" (data: {"rank",
 * "generation","reason"}: a rank's generation ended), "done" (data: {"state"}: the job ended; the
 * response ends).  The job has ended for the follow once its state is final and every rank of its last
 * generation has written its end entry, or LOGS_END_WAIT_S plus the job's grace_s after its state became
 * final (a rank whose worker died writes none); the state is read before the XRANGE that decides, so
 * every entry written before the final state is sent.
 *
 * Reads use the bus's command connection without blocking (no XREAD BLOCK: that connection carries the
 * outbox), so a follow's latency is LOGS_POLL_MS at most. */
#include "server/logs.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/jobstate.h"
#include "wire/keys.h"
#include "wire/log_entry.h"
#include "wire/redis_link.h"
#include "common/utf8.h"
#include "server/api.h"
#include "server/bus.h"
#include "server/jobs.h"
#include "server/sse.h"
#include "spec/program_spec.h"
#include "spec/train_spec.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define LOGS_TAIL_DEFAULT 100
#define LOGS_TAIL_MAX 10000
#define LOGS_RANK_MAX 65535
#define LOGS_PAGE 128               /* entries per XREVRANGE / XRANGE */
#define LOGS_SCAN_BYTES (64u << 20) /* the most of the stream one tail reads */
#define LOGS_POLL_MS 200            /* how often a follower reads new entries */
#define LOGS_BACKLOG (1u << 20)     /* a follower whose client has this much unsent is not read for */
#define LOGS_FOLLOWERS 16           /* open follows per tenant */
#define LOGS_END_WAIT_S 5           /* after the job's final state, for end entries (plus its grace_s) */

struct logs_hub {
    server *srv;
    struct follower *head;
    uv_timer_t tick;
};

/* the ranks of the newest generation seen, and which of them wrote their end entry */
typedef struct {
    long gen;
    int n, cap;
    int *rank;
    bool *ended;
} gen_ranks;

typedef struct follower {
    logs_hub *hub;
    sse_stream *s; /* NULL once the request is gone */
    char key[128], job_id[64], tenant[48];
    char last[48];    /* the newest entry id sent */
    int rank;         /* -1: every rank */
    bool prefix;      /* "[rank R] " before each line */
    int first_rank;   /* the first rank seen (-1 none): a second one turns prefix on */
    bool inflight;    /* an XRANGE is out: freed by its callback when the stream is gone */
    bool terminal;    /* the job's state was final when the XRANGE out now was sent */
    bool done;        /* "done" sent, the response ends */
    int64_t final_ms; /* when the job was first seen in a final state, 0 before */
    int end_wait_ms;
    char state[16];
    gen_ranks ranks;
    struct follower *prev, *next;
} follower;

/* ---- lines ---- */

char *logs_line_text(const char *p, size_t n)
{
    if (n > 0 && p[n - 1] == '\r') n--; /* CRLF */
    for (size_t i = n; i > 0; i--)
        if (p[i - 1] == '\r') { /* a line rewritten by CR (a progress bar): what the terminal shows */
            p += i, n -= i;
            break;
        }
    char *line = xmalloc(n + 1);
    for (size_t i = 0; i < n; i++)
        line[i] = p[i] ? p[i] : '?';
    line[n] = '\0';
    utf8_scrub(line);
    char *out = utf8_escape_line(line);
    free(line);
    return out;
}

/* the text of a line as sent: "[rank R] " and the line */
static char *shown(int rank, bool prefix, const char *p, size_t n)
{
    char *text = logs_line_text(p, n);
    if (!prefix) return text;
    char *out = xasprintf("[rank %d] %s", rank, text);
    free(text);
    return out;
}

/* ---- entries ---- */

typedef log_entry entry; /* wire/log_entry.h: the stream's one codec */

/* one XRANGE / XREVRANGE element's fields through the decoder: false when it is not an entry of the format */
static bool parse_entry(const redisReply *e, entry *out)
{
    const char *v[LOG_ENTRY_MAX_FIELDS];
    size_t lens[LOG_ENTRY_MAX_FIELDS];
    memset(out, 0, sizeof(*out));
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING) return false;
    const redisReply *f = e->element[1];
    if (f->type != REDIS_REPLY_ARRAY || f->elements > LOG_ENTRY_MAX_FIELDS) return false;
    for (size_t i = 0; i < f->elements; i++) {
        if (f->element[i]->type != REDIS_REPLY_STRING) return false;
        v[i] = f->element[i]->str, lens[i] = f->element[i]->len;
    }
    return log_entry_decode(f->elements, v, lens, out) == 0;
}

static void ranks_note(gen_ranks *g, const entry *e)
{
    if (e->gen < g->gen) return;
    if (e->gen > g->gen) g->gen = e->gen, g->n = 0;
    int i = 0;
    while (i < g->n && g->rank[i] != (int)e->rank)
        i++;
    if (i == g->n) {
        if (g->n == g->cap) {
            g->cap = g->cap ? g->cap * 2 : 8;
            g->rank = xreallocarray(g->rank, (size_t)g->cap, sizeof(*g->rank));
            g->ended = xreallocarray(g->ended, (size_t)g->cap, sizeof(*g->ended));
        }
        g->rank[i] = (int)e->rank;
        g->ended[i] = false;
        g->n++;
    }
    if (e->end) g->ended[i] = true;
}

static bool ranks_all_ended(const gen_ranks *g)
{
    for (int i = 0; i < g->n; i++)
        if (!g->ended[i]) return false;
    return g->n > 0;
}

/* ---- the request ---- */

/* an integer query parameter within [lo, hi]: 0 (with *v unchanged when absent), or -1 with the 400 sent */
static int query_int(http_ctx *c, const char *name, long lo, long hi, long *v)
{
    const char *s = http_query(c, name);
    if (!s) return 0;
    char *end;
    long n = strtol(s, &end, 10);
    if (!*s || *end || n < lo || n > hi) {
        http_error(c, GERR_INVALID_FIELD, name, "must be an integer from %ld to %ld", lo, hi);
        return -1;
    }
    *v = n;
    return 0;
}

typedef struct {
    logs_hub *hub;
    http_defer *defer;
    char key[128], job_id[64], tenant[48];
    long rank;    /* -1: every rank */
    long want;    /* lines */
    bool program; /* the job's spec names a program: no stream yet is no output yet, not a 404 */
    bool several; /* the spec allows several ranks */
    bool follow;
    int grace_s;
    char newest[48], before[48]; /* the newest entry id; where the next page ends (exclusive) */
    size_t scanned;
    bool any; /* the stream had an entry */
    int first_rank;
    bool ranks_differ;
    gen_ranks ranks;
    /* the lines found, newest first */
    struct line {
        int rank;
        char *text;
        size_t len;
    } * lines;
    size_t n, cap;
} tail_op;

static void tail_free(tail_op *op)
{
    for (size_t i = 0; i < op->n; i++)
        free(op->lines[i].text);
    free(op->lines);
    free(op->ranks.rank);
    free(op->ranks.ended);
    free(op);
}

static void add_line(tail_op *op, int rank, const char *p, size_t n)
{
    if (op->n == op->cap) {
        op->cap = op->cap ? op->cap * 2 : 64;
        op->lines = xreallocarray(op->lines, op->cap, sizeof(*op->lines));
    }
    char *copy = xmalloc(n + 1); /* bytes as written: a NUL among them too (logs_line_text) */
    memcpy(copy, p, n);
    copy[n] = '\0';
    op->lines[op->n++] = (struct line){rank, copy, n};
}

/* the lines of a chunk, last first, until the tail has what it wants */
static void take_lines(tail_op *op, const entry *e)
{
    const char *start = e->text, *end = e->text + e->text_len;
    if (end > start && end[-1] == '\n') end--; /* whole lines: the last LF ends the chunk */
    while ((long)op->n < op->want) {
        const char *p = end;
        while (p > start && p[-1] != '\n')
            p--;
        if (end == start && p == start && e->text_len == 0) break;
        add_line(op, (int)e->rank, p, (size_t)(end - p));
        if (p == start) break;
        end = p - 1;
    }
}

static void follow_start(tail_op *op, http_ctx *c, bool prefix);

static void tail_reply(http_ctx *c, tail_op *op)
{
    if (!op->any && !op->program) {
        http_error(c, GERR_NOT_FOUND, "id", "job %s has no logs: only a program job (spec.program) has", op->job_id);
        return;
    }
    bool prefix = op->rank < 0 && (op->several || op->ranks_differ);
    if (op->follow) {
        follow_start(op, c, prefix);
        return;
    }
    char *out = NULL;
    size_t len = 0;
    FILE *f = xopen_memstream(&out, &len);
    for (size_t i = op->n; i-- > 0;) {
        char *line = shown(op->lines[i].rank, prefix, op->lines[i].text, op->lines[i].len);
        fputs(line, f);
        fputc('\n', f);
        free(line);
    }
    fclose(f);
    http_reply_text(c, 200, "text/plain; charset=utf-8", out, len);
    free(out);
}

static void on_page(redis_link *l, const redisReply *rep, const char *err, void *priv)
{
    (void)err;
    tail_op *op = priv;
    http_ctx *c = http_defer_ctx(op->defer);
    if (!c) goto done;                            /* the client went away */
    if (!rep || rep->type != REDIS_REPLY_ARRAY) { /* an error reply was logged with the command */
        http_error(c, GERR_UNAVAILABLE, NULL, "the logs cannot be read now (Redis); retry");
        goto done;
    }
    for (size_t i = 0; i < rep->elements; i++) {
        redisReply *el = rep->element[i];
        if (el->type == REDIS_REPLY_ARRAY && el->elements == 2 && el->element[0]->type == REDIS_REPLY_STRING) {
            snprintf(op->before, sizeof(op->before), "(%s", el->element[0]->str);
            if (!op->any) snprintf(op->newest, sizeof(op->newest), "%s", el->element[0]->str);
            op->any = true;
        }
        entry e;
        if (!parse_entry(el, &e)) continue;
        op->scanned += e.text_len;
        if (op->first_rank < 0) op->first_rank = (int)e.rank;
        if (e.rank != op->first_rank) op->ranks_differ = true;
        ranks_note(&op->ranks, &e);
        if (e.text && (op->rank < 0 || e.rank == op->rank)) take_lines(op, &e);
    }
    if (rep->elements == LOGS_PAGE && (long)op->n < op->want && op->scanned < LOGS_SCAN_BYTES &&
        redis_link_cmd(l, on_page, op, "XREVRANGE logs", "XREVRANGE %s %s - COUNT %d", op->key, op->before, LOGS_PAGE) == 0)
        return;
    tail_reply(c, op);
done:
    http_defer_end(op->defer);
    tail_free(op);
}

static int followers_of(const logs_hub *h, const char *tenant)
{
    int n = 0;
    for (const follower *f = h->head; f; f = f->next)
        n += f->s && !f->done && !strcmp(f->tenant, tenant);
    return n;
}

void api_job_logs(http_ctx *c)
{
    logs_hub *hub = c->srv->logs;
    long rank = -1, want = LOGS_TAIL_DEFAULT, follow = 0;
    if (query_int(c, "rank", 0, LOGS_RANK_MAX, &rank) || query_int(c, "tail", 0, LOGS_TAIL_MAX, &want) ||
        query_int(c, "follow", 0, 1, &follow))
        return;
    json_t *job = api_job_visible(c, true);
    if (!job) return;
    if (follow && followers_of(hub, c->auth.tenant_id) >= LOGS_FOLLOWERS) {
        json_decref(job);
        http_add_header(c, "retry-after", "5");
        http_error(c, GERR_RATE_LIMITED, "follow", "your tenant already follows %d logs; close one first", LOGS_FOLLOWERS);
        return;
    }
    redis_link *redis = bus_redis(c->srv->bus);
    if (!redis_link_up(redis)) {
        json_decref(job);
        http_add_header(c, "retry-after", "1");
        http_error(c, GERR_UNAVAILABLE, NULL, "the logs cannot be read now (Redis is unreachable); retry");
        return;
    }
    tail_op *op = xcalloc(1, sizeof(*op));
    op->hub = hub;
    snprintf(op->job_id, sizeof(op->job_id), "%s", json_string_value(json_object_get(job, "id")));
    snprintf(op->key, sizeof(op->key), "%s%s", K_LOGS_PREFIX, op->job_id);
    snprintf(op->tenant, sizeof(op->tenant), "%s", c->auth.tenant_id);
    const json_t *spec = json_object_get(job, "spec");
    op->program = train_spec_variant(spec) == TRAIN_PROGRAM;
    if (op->program) {
        program_settings ps;
        program_settings_get(spec, 0, &ps);
        op->several = ps.max_workers > 1;
        op->grace_s = ps.grace_s;
    }
    op->rank = rank;
    op->want = want;
    op->follow = follow;
    op->first_rank = -1;
    op->ranks.gen = -1;
    json_decref(job);
    op->defer = http_defer_begin(c);
    if (redis_link_cmd(redis, on_page, op, "XREVRANGE logs", "XREVRANGE %s + - COUNT %d", op->key, LOGS_PAGE) != 0) {
        http_error(c, GERR_UNAVAILABLE, NULL, "the logs cannot be read now (Redis); retry");
        http_defer_end(op->defer);
        tail_free(op);
    }
}

/* ---- follow ---- */

static void follower_free(follower *f)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        f->hub->head = f->next;
    if (f->next) f->next->prev = f->prev;
    free(f->ranks.rank);
    free(f->ranks.ended);
    free(f);
}

static void on_stream_closed(void *arg)
{
    follower *f = arg;
    f->s = NULL;
    if (!f->inflight) follower_free(f); /* else the XRANGE's callback frees it */
}

static void send_line(follower *f, int rank, const char *p, size_t n)
{
    if (f->rank < 0 && !f->prefix) {
        if (f->first_rank < 0) f->first_rank = rank;
        f->prefix = rank != f->first_rank;
    }
    char *line = shown(rank, f->prefix, p, n);
    sse_send(f->s, "log", line);
    free(line);
}

static void follow_start(tail_op *op, http_ctx *c, bool prefix)
{
    follower *f = xcalloc(1, sizeof(*f));
    f->hub = op->hub;
    snprintf(f->key, sizeof(f->key), "%s", op->key);
    snprintf(f->job_id, sizeof(f->job_id), "%s", op->job_id);
    snprintf(f->tenant, sizeof(f->tenant), "%s", op->tenant);
    snprintf(f->last, sizeof(f->last), "%s", op->any ? op->newest : "0-0");
    f->rank = (int)op->rank;
    f->prefix = prefix;
    f->first_rank = op->first_rank;
    f->end_wait_ms = (LOGS_END_WAIT_S + op->grace_s) * 1000;
    f->ranks = op->ranks; /* seeded with what the tail saw */
    op->ranks = (gen_ranks){0};
    f->next = f->hub->head;
    if (f->next) f->next->prev = f;
    f->hub->head = f;
    f->s = sse_open(c->srv->sse, c->req, on_stream_closed, f);
    for (size_t i = op->n; i-- > 0;)
        send_line(f, op->lines[i].rank, op->lines[i].text, op->lines[i].len);
}

static void poll_one(follower *f);

static void finish(follower *f)
{
    char data[64];
    snprintf(data, sizeof(data), "{\"state\":\"%s\"}", f->state);
    sse_send(f->s, "done", data);
    sse_finish(f->s);
    f->done = true;
}

static void on_range(redis_link *l, const redisReply *rep, const char *err, void *priv)
{
    (void)l, (void)err;
    follower *f = priv;
    f->inflight = false;
    if (!f->s) {
        follower_free(f);
        return;
    }
    if (!rep || rep->type != REDIS_REPLY_ARRAY) return; /* the next tick tries again (an error was logged) */
    for (size_t i = 0; i < rep->elements; i++) {
        redisReply *el = rep->element[i];
        if (el->type == REDIS_REPLY_ARRAY && el->elements == 2 && el->element[0]->type == REDIS_REPLY_STRING)
            snprintf(f->last, sizeof(f->last), "%s", el->element[0]->str);
        entry e;
        if (!parse_entry(el, &e)) continue;
        ranks_note(&f->ranks, &e);
        if (e.end) {
            char *reason = xstrndup(e.end, e.end_len);
            utf8_scrub(reason);
            json_t *o = json_pack("{s:I, s:I, s:s}", "rank", (json_int_t)e.rank, "generation", (json_int_t)e.gen, "reason", reason);
            char *data = json_dumps(o, JSON_COMPACT);
            if (f->rank < 0 || e.rank == f->rank) sse_send(f->s, "end", data);
            free(data);
            json_decref(o);
            free(reason);
        }
        if (!e.text || (f->rank >= 0 && e.rank != f->rank)) continue;
        const char *start = e.text, *end = e.text + e.text_len;
        while (start < end) {
            const char *nl = memchr(start, '\n', (size_t)(end - start));
            const char *stop = nl ? nl : end;
            send_line(f, (int)e.rank, start, (size_t)(stop - start));
            start = stop + 1;
        }
    }
    if (rep->elements == LOGS_PAGE) { /* more waiting: read on at once */
        poll_one(f);
        return;
    }
    /* every rank that printed has ended, or the wait for them is over (none printed: LOGS_END_WAIT_S) */
    int wait_ms = f->ranks.n ? f->end_wait_ms : LOGS_END_WAIT_S * 1000;
    if (f->terminal && (ranks_all_ended(&f->ranks) || clock_now_ms() - f->final_ms >= wait_ms)) finish(f);
}

static void poll_one(follower *f)
{
    redis_link *redis = bus_redis(f->hub->srv->bus);
    if (!redis_link_up(redis) || f->inflight || f->done || !f->s || sse_pending(f->s) > LOGS_BACKLOG) return;
    json_t *job = jobs_get_json(f->hub->srv->db, f->job_id, NULL, false);
    const char *state = json_string_value(json_object_get(job, "state"));
    if (state) snprintf(f->state, sizeof(f->state), "%s", state);
    json_decref(job);
    f->terminal = job_state_terminal(job_state_parse(f->state));
    if (f->terminal && !f->final_ms) f->final_ms = clock_now_ms();
    char from[56];
    snprintf(from, sizeof(from), "(%s", f->last);
    if (redis_link_cmd(redis, on_range, f, "XRANGE logs", "XRANGE %s %s + COUNT %d", f->key, from, LOGS_PAGE) == 0)
        f->inflight = true;
}

static void on_tick(uv_timer_t *t)
{
    logs_hub *h = t->data;
    for (follower *f = h->head; f; f = f->next)
        poll_one(f);
}

logs_hub *logs_create(server *srv)
{
    logs_hub *h = xcalloc(1, sizeof(*h));
    h->srv = srv;
    uv_timer_init(srv->loop, &h->tick);
    h->tick.data = h;
    uv_timer_start(&h->tick, on_tick, LOGS_POLL_MS, LOGS_POLL_MS);
    uv_unref((uv_handle_t *)&h->tick);
    return h;
}

void logs_close(logs_hub *h)
{
    uv_timer_stop(&h->tick);
    uv_close((uv_handle_t *)&h->tick, NULL);
}
