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

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <uv.h>

int redis_uv_attach(redisAsyncContext *ac, uv_loop_t *loop);

/* Starts an async connection on the loop with both callbacks and ac->data set,
 * AUTH queued first when password is not empty.  NULL when it cannot even start
 * (the caller retries from a timer). */
redisAsyncContext *redis_uv_connect(uv_loop_t *loop, const char *host, int port, const char *password,
                                    redisConnectCallback *on_connect, redisDisconnectCallback *on_disconnect, void *data);

#endif
