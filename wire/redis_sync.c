/* redis_sync.c - the blocking Redis connection of the scheduler and workers, every reply checked (redis_sync.h). */
#include "wire/redis_sync.h"
#include "common/clock.h"
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RETRY_US 200000

int rs_init(rs_conn *r, const char *hostport, const redis_auth *auth)
{
    memset(r, 0, sizeof(*r));
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof(r->host)) return -1;
    memcpy(r->host, hostport, (size_t)(colon - hostport));
    r->port = atoi(colon + 1);
    if (auth) r->auth = *auth;
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
    if (redis_auth_wanted(&r->auth)) {
        const char *argv[3];
        int argc = redis_auth_argv(&r->auth, argv);
        redisReply *rep = redisCommandArgv(r->c, argc, argv, NULL);
        if (!rep) {
            drop(r, r->c->errstr);
            return false;
        }
        bool ok = rep->type != REDIS_REPLY_ERROR;
        if (!ok) {
            redis_auth_refused(&r->auth, rep->str);
            r->was_down = true; /* said once: drop does not log "AUTH" again */
        }
        freeReplyObject(rep);
        if (!ok) {
            drop(r, "AUTH refused");
            return false;
        }
        redis_auth_accepted();
    }
    if (r->was_down) log_info("redis %s:%d: connected", r->host, r->port);
    r->was_down = false;
    return true;
}

/* logs an error reply "redis: CMD: error" unless it starts with expected; the same line at most once a
 * minute.  name is the command's first word (up to a space), from the format or argv[0]. */
static void check(rs_conn *r, const redisReply *rep, const char *name, size_t name_len, const char *expected)
{
    if (!rep || rep->type != REDIS_REPLY_ERROR) return;
    if (expected && strncmp(rep->str, expected, strlen(expected)) == 0) return;
    char line[sizeof(r->last_err)];
    snprintf(line, sizeof(line), "%.*s: %s", (int)(name_len < 32 ? name_len : 32), name, rep->str);
    int64_t now = clock_mono_us();
    if (strcmp(line, r->last_err) == 0 && now - r->last_err_us < 60 * 1000000LL) return;
    snprintf(r->last_err, sizeof(r->last_err), "%s", line);
    r->last_err_us = now;
    log_warn("redis: %s", line);
}

static redisReply *command_v(rs_conn *r, const char *expected, const char *fmt, va_list ap)
{
    if (!rs_ensure(r)) return NULL;
    redisReply *rep = redisvCommand(r->c, fmt, ap);
    if (!rep) drop(r, r->c->errstr);
    check(r, rep, fmt, strcspn(fmt, " "), expected);
    return rep;
}

redisReply *rs_command(rs_conn *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = command_v(r, NULL, fmt, ap);
    va_end(ap);
    return rep;
}

redisReply *rs_command_expect(rs_conn *r, const char *expected, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = command_v(r, expected, fmt, ap);
    va_end(ap);
    return rep;
}

bool rs_do(rs_conn *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = command_v(r, NULL, fmt, ap);
    va_end(ap);
    bool ok = rep && rep->type != REDIS_REPLY_ERROR;
    freeReplyObject(rep);
    return ok;
}

redisReply *rs_command_argv(rs_conn *r, int argc, const char **argv, const size_t *lens)
{
    if (!rs_ensure(r)) return NULL;
    redisReply *rep = redisCommandArgv(r->c, argc, argv, lens);
    if (!rep) drop(r, r->c->errstr);
    if (argc > 0) check(r, rep, argv[0], lens ? lens[0] : strlen(argv[0]), NULL);
    return rep;
}

redisReply *rs_get_reply(rs_conn *r, const char *name)
{
    redisReply *rep = NULL;
    if (!r->c) return NULL;
    if (redisGetReply(r->c, (void **)&rep) != REDIS_OK) {
        drop(r, r->c->errstr);
        return NULL;
    }
    check(r, rep, name, strlen(name), NULL);
    return rep;
}

bool rs_group_create(rs_conn *r, const char *stream, const char *group, const char *id)
{
    redisReply *rep = rs_command_expect(r, "BUSYGROUP", "XGROUP CREATE %s %s %s MKSTREAM", stream, group, id);
    bool ok = rep && (rep->type != REDIS_REPLY_ERROR || strncmp(rep->str, "BUSYGROUP", 9) == 0);
    freeReplyObject(rep);
    return ok;
}

void rs_close(rs_conn *r)
{
    if (r->c) redisFree(r->c);
    r->c = NULL;
}
