/* redis_uv.h - attach a hiredis 0.14 async context to a libuv loop.
 *
 * Our own adapter instead of <hiredis/adapters/libuv.h>: that one drops poll
 * errors (connection refused), so hiredis never learns the connect failed and
 * queued commands wait forever.  Here a poll error is handed to hiredis as the
 * pending read/write events, and hiredis reports the failure through the
 * connect or disconnect callback.  The context is freed by hiredis; the poll
 * handle is freed in its close callback. */
#ifndef GANTRY_REDIS_UV_H
#define GANTRY_REDIS_UV_H

#include "wire/redis_auth.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <uv.h>

int redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop);

/* The async side of the reply policy (docs/errors.md; redis_sync.h for the blocking side).
 * redis_uv_ok: false for no reply (the connection went away: its disconnect callback reports that) and
 * for an error reply, which it logs as "redis: <what>: <error>"; every callback checks its reply with it.
 * redis_uv_log_reply: the callback for a command whose reply nobody waits for; privdata is what (a
 * string that lives as long as the command, e.g. a literal).  An error line is logged at most once a
 * minute (one libuv loop calls these: the server). */
bool redis_uv_ok(const redisReply *rep, const char *what);
void redis_uv_log_reply(redisAsyncContext *ac, void *reply, void *what);
/* redis_uv_log_reply for XGROUP CREATE: BUSYGROUP (the group exists) is success */
void redis_uv_group_reply(redisAsyncContext *ac, void *reply, void *what);

/* Starts an async connection on the loop with both callbacks and ac->data set,
 * AUTH queued first when auth has a password (auth must live as long as the connection: a refusal is
 * logged with its user name; the connection stays, and its commands fail with NOAUTH).  NULL when it
 * cannot even start (the caller retries from a timer). */
redisAsyncContext *redis_uv_connect(uv_loop_t *loop, const char *host, int port, const redis_auth *auth,
                                    redisConnectCallback *on_connect, redisDisconnectCallback *on_disconnect, void *data);

#endif
