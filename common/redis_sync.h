/* redis_sync.h - a blocking hiredis connection that reconnects (scheduler, workers).
 * rs_command returns NULL when Redis is unreachable; the next call reconnects. */
#ifndef GANTRY_REDIS_SYNC_H
#define GANTRY_REDIS_SYNC_H

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    char host[256];
    int port;
    char password[256];
    redisContext *c;
    int64_t next_try_us;
    bool was_down; /* for one log line per outage */
} rs_conn;

/* parses "host:port"; 0 or -1 */
int rs_init(rs_conn *r, const char *hostport, const char *password);
/* connects when needed; false when Redis is unreachable (with backoff) */
bool rs_ensure(rs_conn *r);
/* like redisCommand; frees the context on an I/O error */
redisReply *rs_command(rs_conn *r, const char *fmt, ...);
redisReply *rs_command_argv(rs_conn *r, int argc, const char **argv, const size_t *lens);
void rs_close(rs_conn *r);

#endif
