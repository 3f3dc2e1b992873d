/* replica_seccomp.c - the system calls a replica may make once loaded (replica_seccomp.h) */
#include "workers/replica_seccomp.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <unistd.h>

/* The system calls a replica may make once its model is loaded: memory, threads (clone only with
 * CLONE_THREAD: no new process), time, its three pipes, signals to itself (abort).  Everything else
 * fails with EPERM: open/openat (no new file), execve, socket/connect (no network, and no Unix
 * socket either), ptrace, kill of another process, mount, bpf ...  clone3 fails with ENOSYS so
 * that glibc's pthread_create falls back to clone, whose flags the filter can see. */
static const int allowed[] = {
    SCMP_SYS(read),
    SCMP_SYS(write),
    SCMP_SYS(readv),
    SCMP_SYS(writev),
    SCMP_SYS(close),
    SCMP_SYS(fstat),
    SCMP_SYS(newfstatat),
    SCMP_SYS(lseek),
    SCMP_SYS(fcntl),
    SCMP_SYS(poll),
    SCMP_SYS(ppoll),
    SCMP_SYS(mmap),
    SCMP_SYS(munmap),
    SCMP_SYS(mremap),
    SCMP_SYS(mprotect),
    SCMP_SYS(madvise),
    SCMP_SYS(brk),
    SCMP_SYS(futex),
    SCMP_SYS(set_robust_list),
    SCMP_SYS(get_robust_list),
    SCMP_SYS(rseq),
    SCMP_SYS(set_tid_address),
    SCMP_SYS(exit),
    SCMP_SYS(exit_group),
    SCMP_SYS(rt_sigaction),
    SCMP_SYS(rt_sigprocmask),
    SCMP_SYS(rt_sigreturn),
    SCMP_SYS(sigaltstack),
    SCMP_SYS(restart_syscall),
    SCMP_SYS(sched_yield),
    SCMP_SYS(sched_getaffinity),
    SCMP_SYS(sched_setaffinity),
    SCMP_SYS(getpid),
    SCMP_SYS(gettid),
    SCMP_SYS(getuid),
    SCMP_SYS(geteuid),
    SCMP_SYS(getgid),
    SCMP_SYS(getegid),
    SCMP_SYS(clock_gettime),
    SCMP_SYS(clock_getres),
    SCMP_SYS(gettimeofday),
    SCMP_SYS(nanosleep),
    SCMP_SYS(clock_nanosleep),
    SCMP_SYS(getrandom),
    SCMP_SYS(getcpu),
    SCMP_SYS(sysinfo),
    SCMP_SYS(getrusage),
    SCMP_SYS(prlimit64),
    SCMP_SYS(membarrier),
    SCMP_SYS(mincore),
};

int replica_lock_down(void)
{
    scmp_filter_ctx f = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!f) return -1;
    /* every thread: libtorch's pool started while the model warmed up */
    int rc = seccomp_attr_set(f, SCMP_FLTATR_CTL_TSYNC, 1);
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]) && rc == 0; i++)
        rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, allowed[i], 0);
    if (rc == 0)
        rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
    if (rc == 0) rc = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    /* signals to itself only (abort(), a thread's cancel) */
    if (rc == 0) rc = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid()));
    if (rc == 0) rc = seccomp_load(f);
    seccomp_release(f);
    return rc;
}
