#include "common/redis_sync.h"
#include "common/clock.h"
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_US 200000

int rs_init(rs_conn *r, const char *hostport, const char *password)
{
    memset(r, 0, sizeof(*r));
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof(r->host)) return -1;
    memcpy(r->host, hostport, (size_t)(colon - hostport));
    r->port = atoi(colon + 1);
    snprintf(r->password, sizeof(r->password), "%s", password ? password : "");
    return r->port > 0 ? 0 : -1;
}

static void drop(rs_conn *r, const char *why)
{
    if (!r->was_down) log_warn("redis %s:%d: %s", r->host, r->port, why);
    r->was_down = true;
    if (r->c) redisFree(r->c);
    r->c = NULL;
    r->next_try_us = clock_mono_us() + RETRY_US;
}

bool rs_ensure(rs_conn *r)
{
    if (r->c) return true;
    if (clock_mono_us() < r->next_try_us) return false;
    struct timeval tv = {2, 0};
    r->c = redisConnectWithTimeout(r->host, r->port, tv);
    if (!r->c || r->c->err) {
        drop(r, r->c ? r->c->errstr : "cannot connect");
        return false;
    }
    redisSetTimeout(r->c, (struct timeval){10, 0});
    if (r->password[0]) {
        redisReply *rep = redisCommand(r->c, "AUTH %s", r->password);
        bool ok = rep && rep->type != REDIS_REPLY_ERROR;
        freeReplyObject(rep);
        if (!ok) {
            drop(r, "AUTH failed");
            return false;
        }
    }
    if (r->was_down) log_info("redis %s:%d: connected", r->host, r->port);
    r->was_down = false;
    return true;
}

redisReply *rs_command(rs_conn *r, const char *fmt, ...)
{
    if (!rs_ensure(r)) return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(r->c, fmt, ap);
    va_end(ap);
    if (!rep) drop(r, r->c->errstr);
    return rep;
}

redisReply *rs_command_argv(rs_conn *r, int argc, const char **argv, const size_t *lens)
{
    if (!rs_ensure(r)) return NULL;
    redisReply *rep = redisCommandArgv(r->c, argc, argv, lens);
    if (!rep) drop(r, r->c->errstr);
    return rep;
}

void rs_close(rs_conn *r)
{
    if (r->c) redisFree(r->c);
    r->c = NULL;
}
