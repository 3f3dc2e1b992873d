/* redis_link.h - one reconnecting async Redis connection on a libuv loop (the server's bus, inference
 * gateway and logs reader), over redis_uv.h's adapter.
 *
 * The link connects at once and again every retry_ms while it is down; an outage is logged once when it
 * starts and once when it ends ("redis: <name>: ...").  on_up runs after each connect (commands may be
 * sent from it: they follow the AUTH the link queued first); on_down after the connection went away (its
 * pending callbacks have run by then, each with no reply).
 *
 * Every reply goes through one check (docs/errors.md) before the caller's callback sees it:
 * redis_uv_ok(reply, what), which logs an error reply as "redis: <what>: <error>".  The callback gets
 *   rep  the reply, never an error reply; NULL when the command failed:
 *   err  then Redis's error text (already logged, unless it begins with the command's `expect`),
 *        or NULL when there was no reply at all (the connection went away, or the link was closed).
 * A NULL callback is a command whose reply nobody waits for: the check alone runs.
 * `what` names the command in the log and must live as long as the command (a literal). */
#ifndef GANTRY_REDIS_LINK_H
#define GANTRY_REDIS_LINK_H

#include "wire/redis_auth.h"

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

typedef struct redis_link redis_link;

typedef void redis_link_event(redis_link *l, void *data);
typedef void redis_link_cb(redis_link *l, const redisReply *rep, const char *err, void *priv);

/* name: for the log ("commands", "events"...); auth must live as long as the link; on_up and on_down may be
 * NULL; data is given to both and by redis_link_data */
redis_link *redis_link_open(uv_loop_t *loop, const char *host, int port, const redis_auth *auth, const char *name, int retry_ms,
                            redis_link_event *on_up, redis_link_event *on_down, void *data);
bool redis_link_up(const redis_link *l);
void *redis_link_data(const redis_link *l);

/* fmt as hiredis's (%s, %b with a length, %d ...; not checked as printf's). 0 when sent (cb runs once, later), -1 when the link is
 * down or hiredis refused it (cb never runs) */
int redis_link_cmd(redis_link *l, redis_link_cb *cb, void *priv, const char *what, const char *fmt, ...);
/* the same, where an error reply beginning with `expect` (e.g. "BUSYGROUP", "NOSCRIPT") is an answer the
 * callback handles: not logged */
int redis_link_cmd_expect(redis_link *l, redis_link_cb *cb, void *priv, const char *what, const char *expect, const char *fmt, ...);
int redis_link_cmd_argv(redis_link *l, redis_link_cb *cb, void *priv, const char *what, int argc, const char **argv,
                        const size_t *lens);

/* stops reconnecting and ends the connection: drain lets the commands already sent get their replies
 * (not for a connection blocked in a read), otherwise their callbacks run at once with no reply.  The
 * link is freed once its timer and connection are gone; do not use it after this. */
void redis_link_close(redis_link *l, bool drain);

#endif
