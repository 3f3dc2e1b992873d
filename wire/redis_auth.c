/* redis_auth.c - the Redis credentials a daemon reads: user, password file or password (redis_auth.h). */
#include "wire/redis_auth.h"
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int secret_file_read(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        if (f) fclose(f);
        return -1;
    }
    /* group read is let through only for the process's own group, not writable by it: what a Kubernetes
     * secret volume with fsGroup gives (0440, group = the pod's runAsGroup = fsGroup) */
    bool group_ok = !(sb.st_mode & S_IRWXG) || ((sb.st_mode & S_IRWXG) == S_IRGRP && sb.st_gid == getegid());
    if (!S_ISREG(sb.st_mode) || (sb.st_mode & S_IRWXO) || !group_ok) {
        fclose(f);
        snprintf(err, errlen, "%s: must be a regular file that neither its group nor others can read (mode %03o; chmod 600 %s)",
                 path, (unsigned)(sb.st_mode & 0777), path);
        return -1;
    }
    size_t len = fread(out, 1, outlen - 1, f);
    int more = fgetc(f) != EOF;
    fclose(f);
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r' || out[len - 1] == ' ' || out[len - 1] == '\t'))
        len--;
    out[len] = '\0';
    if (more || len == 0 || memchr(out, '\0', len)) {
        snprintf(err, errlen, "%s: must hold one secret of 1 to %zu bytes (no NUL)", path, outlen - 1);
        out[0] = '\0';
        return -1;
    }
    return (int)len;
}

int redis_auth_from_options(redis_auth *a, const char *user, const char *password, const char *password_file)
{
    memset(a, 0, sizeof(*a));
    user = user ? user : "";
    password = password ? password : "";
    password_file = password_file ? password_file : "";
    if (strlen(user) >= sizeof(a->user) || strchr(user, ' ')) {
        log_error("--redis-user: a name of at most %zu bytes without spaces", sizeof(a->user) - 1);
        return -1;
    }
    snprintf(a->user, sizeof(a->user), "%s", user);
    if (password[0] && password_file[0]) {
        log_error("give --redis-password or --redis-password-file, not both");
        return -1;
    }
    if (password_file[0]) {
        char err[512];
        if (secret_file_read(password_file, a->password, sizeof(a->password), err, sizeof(err)) < 0) {
            log_error("--redis-password-file %s", err);
            return -1;
        }
    } else if (strlen(password) >= sizeof(a->password)) {
        log_error("--redis-password: at most %zu bytes", sizeof(a->password) - 1);
        return -1;
    } else {
        snprintf(a->password, sizeof(a->password), "%s", password);
    }
    if (a->user[0] && !a->password[0]) {
        log_error("--redis-user %s needs --redis-password-file (or --redis-password)", a->user);
        return -1;
    }
    return 0;
}

int redis_auth_argv(const redis_auth *a, const char *argv[3])
{
    int n = 0;
    argv[n++] = "AUTH";
    if (a->user[0]) argv[n++] = a->user;
    argv[n++] = a->password;
    return n;
}

static atomic_int failing;

void redis_auth_accepted(void)
{
    atomic_store(&failing, 0);
}

bool redis_auth_failing(void)
{
    return atomic_load(&failing) != 0;
}

void redis_auth_refused(const redis_auth *a, const char *reply)
{
    atomic_store(&failing, 1);
    /* the scheduler and the server call this from one thread, a worker from two (tasks, heartbeat) */
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char last[256];
    static int64_t last_us;
    char line[sizeof(last)];
    snprintf(line, sizeof(line), "Redis refused our credentials (user %s): %s", a->user[0] ? a->user : "default",
             reply ? reply : "(no reply)");
    int64_t now = clock_mono_us();
    pthread_mutex_lock(&mu);
    bool repeat = strcmp(line, last) == 0 && now - last_us < 60 * 1000000LL;
    if (!repeat) {
        snprintf(last, sizeof(last), "%s", line);
        last_us = now;
    }
    pthread_mutex_unlock(&mu);
    if (!repeat) log_error("%s", line);
}
