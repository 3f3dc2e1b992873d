/* prog_rank_init.c - gantry-rank-init: the first thing a rank runs inside its sandbox
 * (workers/program/prog_sandbox.h binds it at PROG_SANDBOX_INIT).
 *
 *   gantry-rank-init --uid=U --gid=G --status-fd=N [--keep-fd=K] -- PROGRAM [ARGS...]
 *
 * Drops root for good (supplementary groups cleared, gid then uid, every capability
 * out of the bounding set, no_new_privs, not dumpable so the program cannot ptrace
 * it), forks, and in the child execs PROGRAM (found on PATH when it has no '/') with
 * the environment it was given.  It writes its report on fd N, one line each:
 *   "start"             the program is about to be exec'd
 *   "exec ERRNO"        the exec failed (errno as a number)
 *   "exit CODE"         the program exited with CODE
 *   "signal SIG"        the program was killed by signal SIG
 * so the supervisor (prog_rank.c) tells "exited 137" from "killed by SIGKILL", which
 * bwrap's own exit status (128 + signal) cannot.  SIGTERM, SIGINT and SIGHUP sent
 * to it are ignored (caught, so the program gets the default dispositions): the
 * supervisor signals every process of the rank and this one must outlive the
 * program to report it.  The program inherits descriptors 0, 1, 2 and K only (a model replica's
 * shared request region, workers/serve/replica_shm.h).  Stays as small as it is: no gantry
 * library. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/close_range.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/capability.h>

static void report(int fd, const char *what, int n)
{
    char line[64];
    int len = snprintf(line, sizeof(line), "%s %d\n", what, n);
    if (fd >= 0 && write(fd, line, (size_t)len) < 0) {
        /* nobody to tell */
    }
}

static void on_signal(int sig)
{
    (void)sig;
}

static int drop(unsigned uid, unsigned gid)
{
    for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return -1;
    if (setgroups(0, NULL) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) return -1;
    if (getuid() == 0 || geteuid() == 0 || getgid() == 0) return -1;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    return 0;
}

int main(int argc, char **argv)
{
    long uid = -1, gid = -1;
    int fd = -1, keep = -1, i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strncmp(argv[i], "--uid=", 6) == 0)
            uid = strtol(argv[i] + 6, NULL, 10);
        else if (strncmp(argv[i], "--gid=", 6) == 0)
            gid = strtol(argv[i] + 6, NULL, 10);
        else if (strncmp(argv[i], "--status-fd=", 12) == 0)
            fd = (int)strtol(argv[i] + 12, NULL, 10);
        else if (strncmp(argv[i], "--keep-fd=", 10) == 0)
            keep = (int)strtol(argv[i] + 10, NULL, 10);
    }
    if (i + 1 >= argc || uid <= 0 || gid <= 0 || fd < 3) {
        fprintf(stderr, "gantry-rank-init: usage: --uid=U --gid=G --status-fd=N -- PROGRAM [ARGS]\n");
        return 127;
    }
    if (drop((unsigned)uid, (unsigned)gid) != 0) {
        fprintf(stderr, "gantry-rank-init: cannot drop to uid %ld gid %ld: %s\n", uid, gid, strerror(errno));
        return 127;
    }
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    report(fd, "start", 0);
    pid_t pid = fork();
    if (pid < 0) {
        report(fd, "exec", errno);
        return 127;
    }
    if (pid == 0) {
        /* the program never holds the report, nor what bwrap left open (its --args and --ro-bind-data descriptors) */
        syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        if (keep >= 3 && keep != fd) fcntl(keep, F_SETFD, 0);
        umask(007); /* what a rank writes is its job group's: the job's other ranks (other uids) may replace it */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvp(argv[i + 1], argv + i + 1);
        int e = errno;
        report(fd, "exec", e);
        fprintf(stderr, "gantry-rank-init: cannot run %s: %s\n", argv[i + 1], strerror(e));
        _exit(126);
    }
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, 0);
        if (w < 0) {
            if (errno == EINTR) continue;
            return 127;
        }
        if (WIFEXITED(st)) {
            report(fd, "exit", WEXITSTATUS(st));
            return WEXITSTATUS(st);
        }
        if (WIFSIGNALED(st)) {
            report(fd, "signal", WTERMSIG(st));
            return 128 + WTERMSIG(st);
        }
    }
}
