/* redis_link.c - one reconnecting async Redis connection (redis_link.h). */
#include "wire/redis_link.h"
#include "common/alloc.h"
#include "common/log.h"
#include "wire/redis_uv.h"

#include <hiredis/async.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct redis_link {
    uv_loop_t *loop;
    char host[256], name[32];
    int port;
    const redis_auth *auth;
    redis_link_event *on_up, *on_down;
    void *data;
    redisAsyncContext *ac; /* connecting or connected; NULL while down */
    bool up;
    bool failing; /* a connect failed and was logged: the next failures of this outage are not */
    bool closing, timer_closed;
    uv_timer_t timer;
};

typedef struct {
    redis_link *l;
    redis_link_cb *cb;
    void *priv;
    const char *what, *expect;
} pending;

static void maybe_free(redis_link *l)
{
    if (l->closing && l->timer_closed && !l->ac) free(l);
}

static void on_timer_closed(uv_handle_t *h)
{
    redis_link *l = h->data;
    l->timer_closed = true;
    maybe_free(l);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    redis_link *l = ac->data;
    if (status != REDIS_OK) {
        /* hiredis frees a context whose connect failed, without a disconnect callback */
        if (!l->failing) log_warn("redis: %s: cannot connect to %s:%d: %s (retrying)", l->name, l->host, l->port, ac->errstr);
        l->failing = true;
        l->ac = NULL;
        maybe_free(l);
        return;
    }
    log_info("redis: %s: connected", l->name);
    l->failing = false;
    l->up = true;
    if (l->on_up && !l->closing) l->on_up(l, l->data);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    redis_link *l = ac->data;
    bool was_up = l->up;
    l->ac = NULL;
    l->up = false;
    if (!l->closing) {
        if (status != REDIS_OK || was_up)
            log_warn("redis: %s: connection lost%s%s", l->name, ac->errstr[0] ? ": " : "", ac->errstr);
        l->failing = true; /* logged: a refused reconnect is the same outage */
        if (l->on_down) l->on_down(l, l->data);
    }
    maybe_free(l);
}

static void connect_now(redis_link *l)
{
    if (l->ac || l->closing) return;
    l->ac = redis_uv_connect(l->loop, l->host, l->port, l->auth, on_connect, on_disconnect, l);
    if (!l->ac && !l->failing) {
        log_warn("redis: %s: cannot start a connection to %s:%d (retrying)", l->name, l->host, l->port);
        l->failing = true;
    }
}

static void on_timer(uv_timer_t *t)
{
    connect_now(t->data);
}

redis_link *redis_link_open(uv_loop_t *loop, const char *host, int port, const redis_auth *auth, const char *name, int retry_ms,
                            redis_link_event *on_up, redis_link_event *on_down, void *data)
{
    redis_link *l = xcalloc(1, sizeof(*l));
    l->loop = loop;
    snprintf(l->host, sizeof(l->host), "%s", host);
    snprintf(l->name, sizeof(l->name), "%s", name);
    l->port = port;
    l->auth = auth;
    l->on_up = on_up, l->on_down = on_down, l->data = data;
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
    uv_timer_start(&l->timer, on_timer, 0, (uint64_t)(retry_ms > 0 ? retry_ms : 500));
    return l;
}

bool redis_link_up(const redis_link *l)
{
    return l && l->up;
}

void *redis_link_data(const redis_link *l)
{
    return l->data;
}

/* The one check every reply goes through (docs/errors.md) */
static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    pending *p = privdata;
    const redisReply *rep = r;
    const char *err = NULL;
    if (rep && rep->type == REDIS_REPLY_ERROR) {
        err = rep->str ? rep->str : "";
        if (!(p->expect && strncmp(err, p->expect, strlen(p->expect)) == 0)) redis_uv_ok(rep, p->what); /* logs it */
        rep = NULL;
    }
    if (p->cb) p->cb(p->l, rep, err, p->priv);
    free(p);
}

static pending *pending_new(redis_link *l, redis_link_cb *cb, void *priv, const char *what, const char *expect)
{
    pending *p = xmalloc(sizeof(*p));
    *p = (pending){l, cb, priv, what ? what : "command", expect};
    return p;
}

static int send_v(redis_link *l, redis_link_cb *cb, void *priv, const char *what, const char *expect, const char *fmt, va_list ap)
{
    if (!redis_link_up(l) || l->closing) return -1;
    pending *p = pending_new(l, cb, priv, what, expect);
    if (redisvAsyncCommand(l->ac, on_reply, p, fmt, ap) != REDIS_OK) {
        free(p);
        return -1;
    }
    return 0;
}

int redis_link_cmd(redis_link *l, redis_link_cb *cb, void *priv, const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = send_v(l, cb, priv, what, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

int redis_link_cmd_expect(redis_link *l, redis_link_cb *cb, void *priv, const char *what, const char *expect, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = send_v(l, cb, priv, what, expect, fmt, ap);
    va_end(ap);
    return rc;
}

int redis_link_cmd_argv(redis_link *l, redis_link_cb *cb, void *priv, const char *what, int argc, const char **argv,
                        const size_t *lens)
{
    if (!redis_link_up(l) || l->closing) return -1;
    pending *p = pending_new(l, cb, priv, what, NULL);
    if (redisAsyncCommandArgv(l->ac, on_reply, p, argc, argv, lens) != REDIS_OK) {
        free(p);
        return -1;
    }
    return 0;
}

void redis_link_close(redis_link *l, bool drain)
{
    if (!l || l->closing) return;
    l->closing = true;
    uv_timer_stop(&l->timer);
    uv_close((uv_handle_t *)&l->timer, on_timer_closed);
    if (!l->ac) return;
    if (drain && l->up) {
        redisAsyncDisconnect(l->ac); /* its disconnect callback clears l->ac, now or after the replies */
    } else {
        redisAsyncContext *ac = l->ac;
        l->ac = NULL; /* a connecting context gets no disconnect callback */
        l->up = false;
        redisAsyncFree(ac);
    }
}
