/* replica_seccomp.h - the seccomp filter a replica process installs on itself once its model is
 * loaded and warmed up (workers/replica_main.c), before it reads its first request: from then on
 * no new file, no process, no socket, no signal to another process (replica_seccomp.c lists what
 * is allowed).  tests/unit/test_replica_proc.c checks it from inside a real sandbox. */
#ifndef GANTRY_REPLICA_SECCOMP_H
#define GANTRY_REPLICA_SECCOMP_H

/* installs the filter on the calling process (all its threads: TSYNC); 0 or -1 */
int replica_lock_down(void);

#endif
