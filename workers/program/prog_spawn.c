/* prog_spawn.c - a sandbox's first process becomes bwrap (prog_spawn.h) */
#include "workers/program/prog_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SPAWN_MAX_FDS 16

void prog_spawn_exec(const int *fds, int n, const char *path, char **argv, char **env)
{
    /* each source is copied above every target first, so that placing one never overwrites another
     * still to be placed */
    int high[SPAWN_MAX_FDS];
    if (n > SPAWN_MAX_FDS) return;
    for (int i = 0; i < n; i++)
        if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, n)) < 0) return; /* n, not more: RLIMIT_NOFILE may be small */
    for (int i = 0; i < n; i++)
        if (dup2(high[i], i) < 0) return; /* dup2 clears close-on-exec */
    syscall(SYS_close_range, (unsigned)n, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        signal(sig, SIG_DFL);
    execve(path, argv, env);
}
