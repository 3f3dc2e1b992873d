/* redis_sync.h - a blocking hiredis connection that reconnects (scheduler, workers).
 * rs_command returns NULL when Redis is unreachable; the next call reconnects.
 *
 * Every reply is checked here (docs/errors.md): an outage is logged once when it starts and once when it
 * ends, an error reply as "redis: <COMMAND>: <error>" (the same line at most once a minute per
 * connection, so a loop that keeps failing does not flood the log).  The caller decides what a failure
 * means: it gets NULL or the error reply from rs_command, false from rs_do. */
#ifndef GANTRY_REDIS_SYNC_H
#define GANTRY_REDIS_SYNC_H

#include "wire/redis_auth.h"

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    char host[256];
    int port;
    redis_auth auth; /* sent on every (re)connect; redis_auth.h */
    redisContext *c;
    int64_t next_try_us;
    bool was_down;      /* for one log line per outage */
    char last_err[160]; /* the last error line logged and when, for one line a minute per repeated error */
    int64_t last_err_us;
} rs_conn;

/* parses "host:port"; auth (copied; NULL: none) is presented on every connect; 0 or -1 */
int rs_init(rs_conn *r, const char *hostport, const redis_auth *auth);
/* connects when needed; false when Redis is unreachable (with backoff) */
bool rs_ensure(rs_conn *r);
/* like redisCommand; frees the context on an I/O error (NULL), logs an error reply (returned as it is) */
redisReply *rs_command(rs_conn *r, const char *fmt, ...);
redisReply *rs_command_argv(rs_conn *r, int argc, const char **argv, const size_t *lens);
/* rs_command for a reply that only says whether it worked: false on NULL or an error reply (logged as
 * rs_command does); frees the reply */
bool rs_do(rs_conn *r, const char *fmt, ...);
/* rs_command where an error that starts with expected ("NOSCRIPT", "BUSYGROUP") is an answer the caller
 * handles, so it is returned without a log line; any other error is logged */
redisReply *rs_command_expect(rs_conn *r, const char *expected, const char *fmt, ...);
/* the next reply of a pipeline (commands queued with redisAppendCommand on r->c after rs_ensure): NULL
 * when the connection failed (it is dropped, and the rest of the pipeline with it), an error reply is
 * logged under name (the command) and returned */
redisReply *rs_get_reply(rs_conn *r, const char *name);
/* XGROUP CREATE stream group id MKSTREAM; true when the group exists afterwards (BUSYGROUP included) */
bool rs_group_create(rs_conn *r, const char *stream, const char *group, const char *id);
void rs_close(rs_conn *r);

#endif
