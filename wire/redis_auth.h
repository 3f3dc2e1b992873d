/* redis_auth.h - the credentials a daemon presents to Redis (docs/operations.md, "Redis credentials").
 *
 * Every connection, sync (redis_sync.h) or async (redis_uv.h), sends "AUTH user password" first (or
 * "AUTH password" for the default user), and again on every reconnect.  hiredis 0.14 has no notion of
 * credentials: AUTH is an ordinary command to it.  A refused AUTH is logged as
 *   Redis refused our credentials (user gantry-worker): WRONGPASS invalid username-password pair ...
 * at most once a minute per line. */
#ifndef GANTRY_REDIS_AUTH_H
#define GANTRY_REDIS_AUTH_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char user[128];     /* "" for Redis's default user */
    char password[512]; /* "" for no AUTH at all */
} redis_auth;

/* The three options every daemon takes, as rows of its config_opt table (common/config.h) */
#define REDIS_AUTH_OPTS                                                                                                            \
    CONFIG_OPT("redis-user", "Redis ACL user to authenticate as (empty: the default user)", ""),                                   \
        CONFIG_OPT("redis-password-file", "file holding the Redis password (mode 600 or 400; trailing white space dropped)", ""),  \
        CONFIG_OPT("redis-password", "Redis AUTH password (empty: none; prefer redis-password-file, which ps does not show)", "")

/* From the options --redis-user, --redis-password and --redis-password-file (either password option,
 * not both).  0, or -1 with the reason logged. */
int redis_auth_from_options(redis_auth *a, const char *user, const char *password, const char *password_file);

/* Reads a secret from a file: a regular file that neither its group nor others can read or write (mode
 * 600 or 400; 440 only when its group is the process's own, as a Kubernetes secret volume with fsGroup
 * makes it), not empty, trailing white space (a newline) dropped.  The length, or -1 with the reason
 * (naming the file and the fix) in err. */
int secret_file_read(const char *path, char *out, size_t outlen, char *err, size_t errlen);

/* true when AUTH is to be sent */
static inline bool redis_auth_wanted(const redis_auth *a)
{
    return a && a->password[0];
}

/* The AUTH command's arguments ("AUTH", [user,] password): their number, 2 or 3 */
int redis_auth_argv(const redis_auth *a, const char *argv[3]);

/* Logs the refusal of AUTH (reply: the error Redis answered), at most once a minute for the same line */
void redis_auth_refused(const redis_auth *a, const char *reply);
/* AUTH answered OK */
void redis_auth_accepted(void);
/* true while the last AUTH answer this process got was a refusal (the server's /readyz says not ready) */
bool redis_auth_failing(void);

#endif
