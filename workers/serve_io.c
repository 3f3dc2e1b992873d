/* serve_io.c - the Redis side of an inference replica: queue, replies, counters, control (serve_io.h). */
#include "workers/serve_io.h"
#include "common/alloc.h"
#include "wire/infer_wire.h"
#include "wire/keys.h"
#include "common/log.h"
#include "wire/lua_scripts.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* a request line (wire/infer_wire.h) parsed in place into m; 0 or -1 */
static int split(serve_msg *m, char *raw, size_t len)
{
    iw_request r;
    memset(&m->req, 0, sizeof(m->req));
    if (iw_request_parse(raw, len, &r) != 0) return -1;
    m->raw = raw, m->id = r.id, m->reply_to = r.reply_to;
    m->req.body = r.body, m->req.len = r.len, m->req.json_len = r.json_len;
    return 0;
}

/* appends the strings of an RPOP/BRPOP reply; returns how many were taken */
static int take(redisReply *rep, serve_msg *out, int room)
{
    int n = 0;
    if (!rep) return 0;
    if (rep->type == REDIS_REPLY_STRING) { /* RPOP without count (unused) */
        char *raw = xmalloc(rep->len + 1);
        memcpy(raw, rep->str, rep->len + 1);
        if (split(&out[n], raw, rep->len) == 0)
            n++;
        else
            free(raw);
        return n;
    }
    if (rep->type != REDIS_REPLY_ARRAY) return 0;
    for (size_t i = 0; i < rep->elements && n < room; i++) {
        redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_STRING) continue;
        char *raw = xmalloc(e->len + 1);
        memcpy(raw, e->str, e->len + 1);
        if (split(&out[n], raw, e->len) == 0)
            n++;
        else {
            log_warn("dropping a malformed inference request");
            free(raw);
        }
    }
    return n;
}

int serve_io_pop(rs_conn *r, const char *job_id, int max, int wait_ms, int delay_ms, serve_msg *out)
{
    char q[160];
    snprintf(q, sizeof(q), "%s%s", K_INFER_QUEUE_PREFIX, job_id);
    int n = 0;
    if (wait_ms <= 0) { /* a look, no wait (BRPOP 0 would block for ever) */
        redisReply *rep = rs_command(r, "RPOP %s %d", q, max);
        if (!rep) return -1;
        n = take(rep, out, max);
        freeReplyObject(rep);
        return n;
    }
    redisReply *rep = rs_command(r, "BRPOP %s %.3f", q, wait_ms / 1000.0);
    if (!rep) return -1;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) { /* [key, value] */
        redisReply *v = rep->element[1];
        char *raw = xmalloc(v->len + 1);
        memcpy(raw, v->str, v->len + 1);
        if (split(&out[0], raw, v->len) == 0)
            n = 1;
        else
            free(raw);
    }
    freeReplyObject(rep);
    if (n == 0) return 0;
    /* the rest of the batch: what is there now; only when others were waiting too
     * (there is load) is it worth waiting batch_delay for the batch to fill */
    for (int round = 0; round < 2 && n < max; round++) {
        if (round == 1) {
            if (delay_ms <= 0 || n == 1) break;
            usleep((useconds_t)delay_ms * 1000);
        }
        rep = rs_command(r, "RPOP %s %d", q, max - n);
        n += take(rep, out + n, max - n);
        freeReplyObject(rep);
    }
    return n;
}

char *serve_msg_answer(serve_msg *m, int *status)
{
    serve_request *q = &m->req;
    *status = q->status ? q->status : q->reply ? 200 : 400;
    char *body = q->reply ? q->reply : serve_error_body(q->err);
    q->reply = NULL;
    return body;
}

void serve_io_reply(rs_conn *r, serve_msg *msgs, int n)
{
    if (!rs_ensure(r)) {
        for (int i = 0; i < n; i++) {
            if (!msgs[i].reply_to) continue;
            free(msgs[i].raw), free(msgs[i].req.reply);
            msgs[i].raw = NULL, msgs[i].req.reply = NULL;
        }
        return;
    }
    int sent = 0;
    for (int i = 0; i < n; i++) {
        if (!msgs[i].reply_to) continue; /* a direct request (workers/serve_direct.h answers it) */
        int status;
        char *body = serve_msg_answer(&msgs[i], &status);
        char head[64];
        int hl = iw_reply_head(head, sizeof(head), msgs[i].id, status); /* wire/infer_wire.h */
        size_t blen = body ? strlen(body) : 0, vlen = (size_t)hl + blen;
        char *val = body && hl > 0 ? xmalloc(vlen) : NULL;
        if (val) memcpy(val, head, (size_t)hl), memcpy(val + hl, body, blen);
        if (val && redisAppendCommand(r->c, "XADD %s MAXLEN ~ 100000 * r %b", msgs[i].reply_to, val, vlen) == REDIS_OK) sent++;
        free(val);
        free(body);
        free(msgs[i].raw);
        msgs[i].raw = NULL;
    }
    for (int i = 0; i < sent; i++) { /* a reply not delivered: the server answers that request 504 at its deadline */
        redisReply *rep = rs_get_reply(r, "XADD");
        if (!rep) break; /* the connection is dropped, and the rest of the pipeline with it */
        freeReplyObject(rep);
    }
}

void serve_io_endpoint(rs_conn *r, const char *job_id, const char *worker_id, const char *endpoint, int attempt)
{
    char v[400];
    snprintf(v, sizeof(v), "%s %d", endpoint ? endpoint : "", attempt);
    if (endpoint) /* one argument: the value holds spaces */
        rs_do(r, "HSET %s%s %s %s", K_INFER_EP_PREFIX, job_id, worker_id, v);
    else
        rs_do(r, "HDEL %s%s %s", K_INFER_EP_PREFIX, job_id, worker_id);
}

void serve_io_stats(rs_conn *r, const char *job_id, const char *worker_id, const char *stats_json)
{
    /* a lost sample only leaves the autoscaler a window behind (rs_do logged why) */
    rs_do(r, "HSET %s%s %s %s", K_INFER_STATS_PREFIX, job_id, worker_id, stats_json);
}

bool serve_io_superseded(rs_conn *r, const char *job_id, int attempt, const char *worker_id)
{
    char drain[192];
    snprintf(drain, sizeof(drain), "%s%s:%s", K_INFER_DRAIN_PREFIX, job_id, worker_id);
    redisReply *rep = rs_command(r, "EVAL %s 2 %s%s:%d %s", lua_infer_superseded, K_RETRY_PREFIX, job_id, attempt, drain);
    bool yes = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer >= 1;
    freeReplyObject(rep);
    return yes;
}

json_t *serve_io_wanted_model(rs_conn *r, const char *job_id)
{
    redisReply *rep = rs_command(r, "GET %s%s", K_INFER_MODEL_PREFIX, job_id);
    json_t *j = rep && rep->type == REDIS_REPLY_STRING ? json_loadb(rep->str, rep->len, 0, NULL) : NULL;
    freeReplyObject(rep);
    return j;
}
