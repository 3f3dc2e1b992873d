/* prog_cgroup.h - a rank's memory, process and CPU limits as control groups, when the
 * machine lets the worker make them (reusable for any process the worker supervises:
 * prog_cgroup_create, then prog_cgroup_set_cpu when a CPU limit applies, then prog_cgroup_join in the child).
 *
 * The worker makes one group per rank below its own (from /proc/self/cgroup): in
 * cgroup v2 (a unified hierarchy at /sys/fs/cgroup with the memory controller) one
 * group with memory.max (memory.swap.max 0) and pids.max; in cgroup v1 one group in
 * the memory hierarchy (memory.limit_in_bytes, and memsw when swap accounting is on)
 * and one in the pids hierarchy (pids.max).  The rank's first process joins them
 * before it execs bwrap, so everything the program starts is counted.  A rank that
 * goes over its memory is killed by the kernel's OOM killer inside the group, and
 * the group's oom_kill counter says so (prog_rank.c reports "memory limit").
 *
 * When no memory controller is writable (a container without cgroup delegation)
 * prog_cgroup_create says why and prog_rank.c falls back to watching the resident memory of the
 * rank's processes; without a pids controller, RLIMIT_NPROC.  Not RLIMIT_AS: torch
 * reserves far more address space than it uses.
 *
 * The CPU limit (prog_cgroup_set_cpu) is a CFS quota: v2 cpu.max "QUOTA 100000" in the same group, v1 a
 * group in the cpu hierarchy (cpu.cfs_quota_us / cpu.cfs_period_us, period 100 ms) and, for its
 * usage, one in cpuacct (the same group when the two are co-mounted as cpu,cpuacct).  A rank over
 * its quota is throttled, never killed.  Without a writable cpu controller prog_cgroup_set_cpu says why and
 * there is no CPU limit (no fallback: the caller reports it). */
#ifndef GANTRY_PROGRAM_PROG_CGROUP_H
#define GANTRY_PROGRAM_PROG_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct prog_cgroup prog_cgroup;

/* The rank's groups named name (unique on the machine) with the limits (0: none).
 * Always returns a handle (never NULL); what could not be made is
 * false in prog_cgroup_has_memory/prog_cgroup_has_pids with the reason in why. */
prog_cgroup *prog_cgroup_create(const char *name, long long memory_bytes, int max_pids, char *why, size_t whylen);
bool prog_cgroup_has_memory(const prog_cgroup *g);
bool prog_cgroup_has_pids(const prog_cgroup *g);
/* A CPU limit of cpus cores' time (1.5: 150 ms per 100 ms period) for the groups of g, before prog_cgroup_join;
 * cpus <= 0: none.  0, or -1 with why (no writable cpu controller): then there is no CPU limit. */
int prog_cgroup_set_cpu(prog_cgroup *g, double cpus, char *why, size_t whylen);
bool prog_cgroup_has_cpu(const prog_cgroup *g);
/* the CPU time the group's processes used, microseconds (v2 cpu.stat usage_usec, v1 cpuacct.usage);
 * -1 when unknown */
long long prog_cgroup_cpu_usage_us(const prog_cgroup *g);
/* moves the calling process into the groups: async-signal-safe (a forked child
 * calls it before exec); 0 or -1 */
int prog_cgroup_join(const prog_cgroup *g);
/* how many processes the kernel killed for the group's memory limit (0 without one) */
long long prog_cgroup_oom_kills(const prog_cgroup *g);
/* removes the groups (their processes must be gone; waits up to 2 s for the kernel to
 * let go) and frees the handle */
void prog_cgroup_destroy(prog_cgroup *g);

#endif
