/* prog_cgroup.c - per-rank control groups, v2 or v1 (prog_cgroup.h). */
#include "workers/program/prog_cgroup.h"

#include "common/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CG_ROOT "/sys/fs/cgroup"

struct prog_cgroup {
    char mem[1024];  /* the memory group's directory ("" none) */
    char pids[1024]; /* the pids group's directory ("" none; the same as mem in v2) */
    char mem_procs[1100], pids_procs[1100];
    char oom_file[1100]; /* memory.events (v2) or memory.oom_control (v1) */
    char cpu[1024];      /* the group with the CPU quota ("" none; the same as mem in v2) */
    char cpuacct[1024];  /* v1: the cpuacct group its usage is read from ("" none; the same as cpu when co-mounted) */
    char cpu_procs[1100], cpuacct_procs[1100];
    char name[256];
    int v2;
};

static int write_file(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    int e = errno;
    close(fd);
    errno = e;
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int exists(const char *dir, const char *file)
{
    char p[1200];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    return access(p, F_OK) == 0;
}

static int set(const char *dir, const char *file, const char *value)
{
    char p[1200];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    return write_file(p, value);
}

/* this process's group in the hierarchy of controller ("" for v2's "0::"), into out */
static int own_group(const char *controller, char *out, size_t outlen)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return -1;
    char line[1024];
    int found = -1;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1;
        bool match = false;
        if (!controller[0]) {
            match = strcmp(line, "0") == 0 && !ctrls[0];
        } else {
            char list[256];
            snprintf(list, sizeof(list), "%s", ctrls);
            for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
                if (strcmp(t, controller) == 0) match = true;
        }
        if (match) {
            snprintf(out, outlen, "%s", strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1);
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

static void make_v2(prog_cgroup *g, const char *name, long long memory_bytes, int max_pids, char *why, size_t whylen)
{
    char own[512], parent[1024];
    if (own_group("", own, sizeof(own)) != 0 || !exists(CG_ROOT, "cgroup.controllers")) return;
    snprintf(parent, sizeof(parent), CG_ROOT "%s", own);
    char dir[1024];
    if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", parent, name) >= sizeof(dir)) return;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(why, whylen, "cannot make a cgroup v2 group under %s: %s", parent, strerror(errno));
        return;
    }
    if (!exists(dir, "memory.max")) {
        /* the controllers are not delegated to our children yet: possible only while our
         * own group holds no process (or is the root) */
        set(parent, "cgroup.subtree_control", "+memory +pids");
        set(parent, "cgroup.subtree_control", "+cpu"); /* apart: a parent without cpu still gives memory and pids */
        if (!exists(dir, "memory.max")) {
            rmdir(dir);
            snprintf(why, whylen, "the cgroup v2 memory controller is not enabled for %s's children", parent);
            return;
        }
    }
    char v[32];
    if (memory_bytes > 0) {
        snprintf(v, sizeof(v), "%lld", memory_bytes);
        if (set(dir, "memory.max", v) != 0) {
            rmdir(dir);
            snprintf(why, whylen, "cannot set memory.max in %s: %s", dir, strerror(errno));
            return;
        }
        set(dir, "memory.swap.max", "0");
    }
    g->v2 = 1;
    snprintf(g->mem, sizeof(g->mem), "%s", dir);
    snprintf(g->oom_file, sizeof(g->oom_file), "%s/memory.events", dir);
    if (exists(dir, "pids.max")) {
        snprintf(g->pids, sizeof(g->pids), "%s", dir);
        if (max_pids > 0) {
            snprintf(v, sizeof(v), "%d", max_pids);
            if (set(dir, "pids.max", v) != 0) g->pids[0] = '\0';
        }
    }
}

/* a v1 group of controller named name, into out; 0 or -1 with why */
static int make_v1(const char *controller, const char *name, char *out, size_t outlen, char *why, size_t whylen)
{
    char own[512], base[600];
    snprintf(base, sizeof(base), CG_ROOT "/%s", controller);
    if (own_group(controller, own, sizeof(own)) != 0 || access(base, W_OK) != 0) {
        snprintf(why, whylen, "no writable cgroup v1 %s hierarchy at %s", controller, base);
        return -1;
    }
    if ((size_t)snprintf(out, outlen, "%s%s/%s", base, own, name) >= outlen) {
        snprintf(why, whylen, "the cgroup path under %s%s is too long", base, own);
        out[0] = '\0';
        return -1;
    }
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        snprintf(why, whylen, "cannot make a cgroup v1 %s group %s: %s", controller, out, strerror(errno));
        out[0] = '\0';
        return -1;
    }
    return 0;
}

static void make_v1_all(prog_cgroup *g, const char *name, long long memory_bytes, int max_pids, char *why, size_t whylen)
{
    char v[32];
    if (make_v1("memory", name, g->mem, sizeof(g->mem), why, whylen) == 0) {
        snprintf(v, sizeof(v), "%lld", memory_bytes);
        if (memory_bytes > 0 && set(g->mem, "memory.limit_in_bytes", v) != 0) {
            snprintf(why, whylen, "cannot set memory.limit_in_bytes in %s: %s", g->mem, strerror(errno));
            rmdir(g->mem);
            g->mem[0] = '\0';
        } else {
            if (memory_bytes > 0 && exists(g->mem, "memory.memsw.limit_in_bytes"))
                set(g->mem, "memory.memsw.limit_in_bytes", v); /* no swapping around the limit */
            snprintf(g->oom_file, sizeof(g->oom_file), "%s/memory.oom_control", g->mem);
        }
    }
    char pwhy[256];
    if (make_v1("pids", name, g->pids, sizeof(g->pids), pwhy, sizeof(pwhy)) == 0 && max_pids > 0) {
        snprintf(v, sizeof(v), "%d", max_pids);
        if (set(g->pids, "pids.max", v) != 0) {
            rmdir(g->pids);
            g->pids[0] = '\0';
        }
    }
}

prog_cgroup *prog_cgroup_create(const char *name, long long memory_bytes, int max_pids, char *why, size_t whylen)
{
    prog_cgroup *g = xcalloc(1, sizeof(*g));
    snprintf(g->name, sizeof(g->name), "%s", name);
    why[0] = '\0';
    make_v2(g, name, memory_bytes, max_pids, why, whylen);
    if (!g->mem[0]) make_v1_all(g, name, memory_bytes, max_pids, why, whylen);
    if (g->mem[0]) snprintf(g->mem_procs, sizeof(g->mem_procs), "%s/cgroup.procs", g->mem);
    if (g->pids[0]) snprintf(g->pids_procs, sizeof(g->pids_procs), "%s/cgroup.procs", g->pids);
    if (g->mem[0]) why[0] = '\0';
    return g;
}

bool prog_cgroup_has_memory(const prog_cgroup *g)
{
    return g && g->mem[0];
}

bool prog_cgroup_has_pids(const prog_cgroup *g)
{
    return g && g->pids[0];
}

/* the cpu period: 100 ms, the kernel's default */
#define CPU_PERIOD_US 100000LL

int prog_cgroup_set_cpu(prog_cgroup *g, double cpus, char *why, size_t whylen)
{
    why[0] = '\0';
    if (cpus <= 0) return 0;
    long long quota = (long long)(cpus * (double)CPU_PERIOD_US + 0.5);
    if (quota < 1000) quota = 1000; /* the kernel's smallest quota is 1 ms */
    char v[64];
    if (g->v2 && g->mem[0]) {
        if (!exists(g->mem, "cpu.max")) { /* not delegated yet: ask the parent (possible while it holds no process) */
            char parent[1024];
            snprintf(parent, sizeof(parent), "%s", g->mem);
            char *slash = strrchr(parent, '/');
            if (slash) *slash = '\0';
            set(parent, "cgroup.subtree_control", "+cpu");
        }
        if (!exists(g->mem, "cpu.max")) {
            snprintf(why, whylen, "the cgroup v2 cpu controller is not enabled for %s", g->mem);
            return -1;
        }
        snprintf(v, sizeof(v), "%lld %lld", quota, CPU_PERIOD_US);
        if (set(g->mem, "cpu.max", v) != 0) {
            snprintf(why, whylen, "cannot set cpu.max in %s: %s", g->mem, strerror(errno));
            return -1;
        }
        snprintf(g->cpu, sizeof(g->cpu), "%s", g->mem);
        return 0;
    }
    if (make_v1("cpu", g->name, g->cpu, sizeof(g->cpu), why, whylen) != 0) return -1;
    snprintf(v, sizeof(v), "%lld", CPU_PERIOD_US);
    char q[32];
    snprintf(q, sizeof(q), "%lld", quota);
    if (set(g->cpu, "cpu.cfs_period_us", v) != 0 || set(g->cpu, "cpu.cfs_quota_us", q) != 0) {
        snprintf(why, whylen, "cannot set cpu.cfs_quota_us in %s: %s", g->cpu, strerror(errno));
        rmdir(g->cpu);
        g->cpu[0] = '\0';
        return -1;
    }
    snprintf(g->cpu_procs, sizeof(g->cpu_procs), "%s/cgroup.procs", g->cpu);
    /* the usage: cpuacct, co-mounted with cpu (cpu,cpuacct) or a hierarchy of its own */
    if (exists(g->cpu, "cpuacct.usage")) {
        snprintf(g->cpuacct, sizeof(g->cpuacct), "%s", g->cpu);
    } else {
        char awhy[256];
        if (make_v1("cpuacct", g->name, g->cpuacct, sizeof(g->cpuacct), awhy, sizeof(awhy)) == 0)
            snprintf(g->cpuacct_procs, sizeof(g->cpuacct_procs), "%s/cgroup.procs", g->cpuacct);
    }
    return 0;
}

bool prog_cgroup_has_cpu(const prog_cgroup *g)
{
    return g && g->cpu[0];
}

long long prog_cgroup_cpu_usage_us(const prog_cgroup *g)
{
    if (!g) return -1;
    char p[1200];
    long long v = -1;
    if (g->v2 && g->cpu[0]) {
        snprintf(p, sizeof(p), "%s/cpu.stat", g->cpu);
        FILE *f = fopen(p, "re");
        if (!f) return -1;
        char key[64];
        long long n;
        while (fscanf(f, "%63s %lld", key, &n) == 2)
            if (strcmp(key, "usage_usec") == 0) v = n;
        fclose(f);
        return v;
    }
    if (!g->cpuacct[0]) return -1;
    snprintf(p, sizeof(p), "%s/cpuacct.usage", g->cpuacct);
    FILE *f = fopen(p, "re");
    if (!f) return -1;
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
    return v >= 0 ? v / 1000 : -1;
}

int prog_cgroup_join(const prog_cgroup *g)
{
    int rc = 0;
    if (g->mem_procs[0] && write_file(g->mem_procs, "0") != 0) rc = -1;
    if (g->pids_procs[0] && strcmp(g->pids_procs, g->mem_procs) != 0 && write_file(g->pids_procs, "0") != 0) rc = -1;
    if (g->cpu_procs[0] && write_file(g->cpu_procs, "0") != 0) rc = -1; /* v1 only (v2: the same group as mem) */
    if (g->cpuacct_procs[0] && write_file(g->cpuacct_procs, "0") != 0) rc = -1;
    return rc;
}

long long prog_cgroup_oom_kills(const prog_cgroup *g)
{
    if (!g || !g->oom_file[0]) return 0;
    FILE *f = fopen(g->oom_file, "re");
    if (!f) return 0;
    char key[64];
    long long v, n = 0;
    while (fscanf(f, "%63s %lld", key, &v) == 2)
        if (strcmp(key, "oom_kill") == 0) n = v;
    fclose(f);
    return n;
}

static void remove_dir(const char *dir)
{
    if (!dir[0]) return;
    for (int i = 0; i < 200; i++) {
        if (rmdir(dir) == 0 || errno == ENOENT) return;
        if (errno != EBUSY) return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

void prog_cgroup_destroy(prog_cgroup *g)
{
    if (!g) return;
    remove_dir(g->mem);
    if (strcmp(g->pids, g->mem) != 0) remove_dir(g->pids);
    if (strcmp(g->cpu, g->mem) != 0) remove_dir(g->cpu);
    if (strcmp(g->cpuacct, g->cpu) != 0) remove_dir(g->cpuacct);
    free(g);
}
