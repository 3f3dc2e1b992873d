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

/* The async side of the reply policy (docs/errors.md; redis_sync.h for the blocking side), the one check
 * every reply of the server's links goes through (wire/redis_link.c calls it for each; no other caller):
 * false for no reply (the connection went away: the link reports that) and for an error reply, which it
 * logs as "redis: <what>: <error>", at most once a minute for the same line (one libuv loop calls it). */
bool redis_uv_ok(const redisReply *rep, const char *what);

/* Starts an async connection on the loop with both callbacks and ac->data set,
 * AUTH queued first when auth has a password (auth must live as long as the connection: a refusal is
 * logged with its user name; the connection stays, and its commands fail with NOAUTH).  NULL when it
 * cannot even start (the caller retries from a timer). */
redisAsyncContext *redis_uv_connect(uv_loop_t *loop, const char *host, int port, const redis_auth *auth,
                                    redisConnectCallback *on_connect, redisDisconnectCallback *on_disconnect, void *data);

#endif
