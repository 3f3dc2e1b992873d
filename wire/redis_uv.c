/* redis_uv.c - hiredis on libuv: the adapter under the server's links, and the one reply check (redis_uv.h). */
#include "wire/redis_uv.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    redisAsyncContext *ac;
    uv_poll_t poll;
    int events;
} redis_uv;

static void on_poll(uv_poll_t *handle, int status, int events)
{
    redis_uv *p = handle->data;
    if (status < 0) events = p->events; /* let hiredis find the error on the socket it wanted */
    if (p->ac && (events & UV_READABLE)) redisAsyncHandleRead(p->ac);
    if (p->ac && (events & UV_WRITABLE)) redisAsyncHandleWrite(p->ac);
}

static void update(redis_uv *p, int add, int del)
{
    p->events = (p->events | add) & ~del;
    if (p->events)
        uv_poll_start(&p->poll, p->events, on_poll);
    else
        uv_poll_stop(&p->poll);
}

static void add_read(void *d)
{
    update(d, UV_READABLE, 0);
}
static void del_read(void *d)
{
    update(d, 0, UV_READABLE);
}
static void add_write(void *d)
{
    update(d, UV_WRITABLE, 0);
}
static void del_write(void *d)
{
    update(d, 0, UV_WRITABLE);
}

static void on_closed(uv_handle_t *h)
{
    free(h->data);
}

static void cleanup(void *d)
{
    redis_uv *p = d;
    p->ac = NULL;
    uv_close((uv_handle_t *)&p->poll, on_closed);
}

int redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    if (ac->ev.data) return REDIS_ERR;
    redis_uv *p = xcalloc(1, sizeof(*p));
    if (uv_poll_init(loop, &p->poll, ac->c.fd) != 0) {
        free(p);
        return REDIS_ERR;
    }
    p->ac = ac;
    p->poll.data = p;
    ac->ev.data = p;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    return REDIS_OK;
}

static void on_auth(redisAsyncContext *ac, void *reply, void *auth)
{
    (void)ac;
    const redisReply *rep = reply;
    if (rep && rep->type == REDIS_REPLY_ERROR)
        redis_auth_refused(auth, rep->str);
    else if (rep)
        redis_auth_accepted();
}

redisAsyncContext *redis_uv_connect(uv_loop_t *loop, const char *host, int port, const redis_auth *auth,
                                    redisConnectCallback *on_connect, redisDisconnectCallback *on_disconnect, void *data)
{
    redisAsyncContext *ac = redisAsyncConnect(host, port);
    if (!ac) return NULL;
    if (ac->err || redis_uv_attach(ac, loop) != REDIS_OK) {
        redisAsyncFree(ac);
        return NULL;
    }
    ac->data = data;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    if (redis_auth_wanted(auth)) {
        const char *argv[3];
        int argc = redis_auth_argv(auth, argv);
        redisAsyncCommandArgv(ac, on_auth, (void *)auth, argc, argv, NULL);
    }
    return ac;
}

bool redis_uv_ok(const redisReply *rep, const char *what)
{
    if (!rep) return false;
    if (rep->type != REDIS_REPLY_ERROR) return true;
    /* the same line at most once a minute, as redis_sync does; the loop's thread is the only caller */
    static char last[160];
    static int64_t last_us;
    char line[sizeof(last)];
    snprintf(line, sizeof(line), "%s: %s", what, rep->str);
    int64_t now = clock_mono_us();
    if (strcmp(line, last) == 0 && now - last_us < 60 * 1000000LL) return false;
    snprintf(last, sizeof(last), "%s", line);
    last_us = now;
    log_warn("redis: %s", line);
    return false;
}
