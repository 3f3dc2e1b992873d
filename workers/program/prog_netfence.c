/* prog_netfence.c - a program rank's network, fenced to its job's peers with nftables (prog_netfence.h: the
 * design and its limits; docs/programs.md "The network"). */
#include "workers/program/prog_netfence.h"

#include "common/alloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define TABLE "inet gantry"

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

unsigned prog_netfence_default_uid(const char *worker_id)
{
    return PROG_NETFENCE_UID_MIN + fnv1a(worker_id ? worker_id : "") % PROG_NETFENCE_UID_COUNT;
}

unsigned prog_netfence_job_gid(const char *job_id)
{
    return PROG_NETFENCE_UID_MIN + (fnv1a(job_id ? job_id : "") >> 7) % PROG_NETFENCE_UID_COUNT;
}

uint32_t prog_netfence_job_mark(const char *job_id)
{
    return PROG_NETFENCE_MARK_BIT | (fnv1a(job_id ? job_id : "") & ~PROG_NETFENCE_MARK_BIT);
}

/* a growing script */
typedef struct {
    char *s;
    size_t n, cap;
} buf;

static void addf(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)need + 1 > b->cap) {
        b->cap = (b->n + (size_t)need + 1) * 2;
        b->s = xrealloc(b->s, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

char *prog_netfence_script_setup(unsigned uid)
{
    buf b = {0};
    addf(&b, "add table " TABLE "\n");
    addf(&b, "add map " TABLE " slots { typeof meta skuid : verdict; }\n");
    addf(&b, "add chain " TABLE " output { type filter hook output priority filter; policy accept; }\n");
    /* the base chain's rules: the same content from every worker, replaced in this one transaction */
    addf(&b, "flush chain " TABLE " output\n");
    addf(&b, "add rule " TABLE " output meta skuid %u-%u meta skuid vmap @slots\n", PROG_NETFENCE_UID_MIN, PROG_NETFENCE_UID_MAX);
    addf(&b, "add rule " TABLE " output meta skuid %u-%u drop\n", PROG_NETFENCE_UID_MIN, PROG_NETFENCE_UID_MAX);
    addf(&b, "add rule " TABLE " output ct direction reply ct mark and 0x%08x == 0x%08x drop\n", PROG_NETFENCE_MARK_BIT,
         PROG_NETFENCE_MARK_BIT);
    /* a connection a rank of another host opened (its packets carry PROG_NETFENCE_DSCP) is a rank's here too */
    addf(&b, "add chain " TABLE " prerouting { type filter hook prerouting priority filter; policy accept; }\n");
    addf(&b, "flush chain " TABLE " prerouting\n");
    addf(&b, "add rule " TABLE " prerouting iifname != \"lo\" ip dscp 0x%02x ct state new ct mark set 0x%08x\n", PROG_NETFENCE_DSCP,
         PROG_NETFENCE_MARK_BIT);
    addf(&b, "add rule " TABLE " prerouting iifname != \"lo\" ip6 dscp 0x%02x ct state new ct mark set 0x%08x\n",
         PROG_NETFENCE_DSCP, PROG_NETFENCE_MARK_BIT);
    /* this slot: idle (whatever a crashed run of this worker left is replaced) */
    addf(&b, "add chain " TABLE " slot_%u\n", uid);
    addf(&b, "flush chain " TABLE " slot_%u\n", uid);
    addf(&b, "add rule " TABLE " slot_%u drop\n", uid);
    addf(&b, "add element " TABLE " slots { %u : jump slot_%u }\n", uid, uid);
    return b.s;
}

char *prog_netfence_script_job(unsigned uid, uint32_t mark, const char *const *peers, size_t n, char *err, size_t errlen)
{
    buf v4 = {0}, v6 = {0};
    for (size_t i = 0; i < n; i++) {
        unsigned char a[16];
        if (inet_pton(AF_INET, peers[i], a) == 1) {
            addf(&v4, "%s%s", v4.n ? ", " : "", peers[i]);
        } else if (inet_pton(AF_INET6, peers[i], a) == 1) {
            addf(&v6, "%s%s", v6.n ? ", " : "", peers[i]);
        } else {
            snprintf(err, errlen, "peers[%zu]: %.100s is not an IPv4 or IPv6 address", i, peers[i]);
            free(v4.s);
            free(v6.s);
            return NULL;
        }
    }
    buf b = {0};
    const char *c = "add rule " TABLE " slot_";
    addf(&b, "add chain " TABLE " slot_%u\n", uid);
    addf(&b, "flush chain " TABLE " slot_%u\n", uid);
    /* a listener of the rank answers: its own job's ranks here, its peer hosts, local non-rank clients */
    addf(&b, "%s%u ct direction reply ct mark 0x%08x accept\n", c, uid, mark);
    /* a rank of a peer host (PROG_NETFENCE_DSCP on its packets: marked PROG_NETFENCE_MARK_BIT alone on arrival) */
    if (v4.n) addf(&b, "%s%u ct direction reply ct mark 0x%08x ip daddr { %s } accept\n", c, uid, PROG_NETFENCE_MARK_BIT, v4.s);
    if (v6.n) addf(&b, "%s%u ct direction reply ct mark 0x%08x ip6 daddr { %s } accept\n", c, uid, PROG_NETFENCE_MARK_BIT, v6.s);
    addf(&b, "%s%u ct direction reply ct mark and 0x%08x == 0x%08x drop\n", c, uid, PROG_NETFENCE_MARK_BIT, PROG_NETFENCE_MARK_BIT);
    /* unmarked from a peer host: a rank whose DSCP the network cleared, or a process of the peer host */
    if (v4.n) addf(&b, "%s%u ct direction reply ip daddr { %s } accept\n", c, uid, v4.s);
    if (v6.n) addf(&b, "%s%u ct direction reply ip6 daddr { %s } accept\n", c, uid, v6.s);
    addf(&b, "%s%u ct direction reply fib daddr type local accept\n", c, uid);
    addf(&b, "%s%u ct direction reply drop\n", c, uid);
    /* the rank's own connections: marked with its job; to this host (the listener's slot decides) or its peers */
    /* marked only when let out: the reset a refused connection gets must not look like a rank's reply */
    addf(&b, "%s%u ct state new meta l4proto tcp fib daddr type local ct mark set 0x%08x accept\n", c, uid, mark);
    /* to a peer host (not this one: the rule above took those): its packets say "a rank" (PROG_NETFENCE_DSCP), all of
     * them, whatever the program set (IP_TOS) */
    if (v4.n) {
        addf(&b, "%s%u ct state new meta l4proto tcp ip daddr { %s } ct mark set 0x%08x\n", c, uid, v4.s, mark);
        addf(&b, "%s%u ct mark 0x%08x ip daddr { %s } ip dscp set 0x%02x accept\n", c, uid, mark, v4.s, PROG_NETFENCE_DSCP);
    }
    if (v6.n) {
        addf(&b, "%s%u ct state new meta l4proto tcp ip6 daddr { %s } ct mark set 0x%08x\n", c, uid, v6.s, mark);
        addf(&b, "%s%u ct mark 0x%08x ip6 daddr { %s } ip6 dscp set 0x%02x accept\n", c, uid, mark, v6.s, PROG_NETFENCE_DSCP);
    }
    addf(&b, "%s%u ct state established,related accept\n", c, uid);
    addf(&b, "%s%u meta l4proto tcp reject with tcp reset\n", c, uid);
    addf(&b, "%s%u reject\n", c, uid);
    addf(&b, "add element " TABLE " slots { %u : jump slot_%u }\n", uid, uid);
    free(v4.s);
    free(v6.s);
    return b.s;
}

char *prog_netfence_script_teardown(unsigned uid)
{
    buf b = {0};
    /* "add" first so that the deletes find what they delete (idempotent: a second teardown does nothing wrong) */
    addf(&b, "add table " TABLE "\n");
    addf(&b, "add map " TABLE " slots { typeof meta skuid : verdict; }\n");
    addf(&b, "add chain " TABLE " slot_%u\n", uid);
    addf(&b, "add element " TABLE " slots { %u : jump slot_%u }\n", uid, uid);
    addf(&b, "delete element " TABLE " slots { %u }\n", uid);
    addf(&b, "delete chain " TABLE " slot_%u\n", uid);
    return b.s;
}

/* runs nft with args (NULL-terminated) and script on its stdin; its output (stdout and stderr) into out, the end
 * kept when it does not fit; 0, or -1 with why */
static int nft_run(const char *const *args, const char *script, char *out, size_t outlen, char *why, size_t whylen)
{
    if (access(PROG_NETFENCE_NFT, X_OK) != 0) {
        snprintf(why, whylen, "%s is not installed (Debian's nftables)", PROG_NETFENCE_NFT);
        return -1;
    }
    int in[2], outp[2];
    if (pipe2(in, O_CLOEXEC) != 0) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(outp, O_CLOEXEC) != 0) {
        close(in[0]), close(in[1]);
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "fork: %s", strerror(errno));
        close(in[0]), close(in[1]), close(outp[0]), close(outp[1]);
        return -1;
    }
    if (pid == 0) {
        if (dup2(in[0], 0) < 0 || dup2(outp[1], 1) < 0 || dup2(outp[1], 2) < 0) _exit(127);
        char *argv[8] = {(char *)PROG_NETFENCE_NFT};
        for (int i = 0; args[i] && i < 6; i++)
            argv[i + 1] = (char *)args[i];
        char *const envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", (char *)"LANG=C", NULL};
        execve(PROG_NETFENCE_NFT, argv, envp);
        _exit(127);
    }
    close(in[0]);
    close(outp[1]);
    /* the script is small (well under a pipe's 64 KiB): written at once, then nft's output read (the worker
     * ignores SIGPIPE) */
    size_t len = script ? strlen(script) : 0, off = 0;
    while (off < len) {
        ssize_t w = write(in[1], script + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    close(in[1]);
    size_t m = 0;
    for (;;) {
        ssize_t r = read(outp[0], out + m, outlen - 1 - m);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        m += (size_t)r;
        if (m == outlen - 1) m = 0; /* keep reading; the end of a long message is kept */
    }
    out[m] = '\0';
    close(outp[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    for (char *p = out; *p; p++) /* one line */
        if (*p == '\n') *p = ' ';
    snprintf(why, whylen, "nft failed (%s%d): %.600s", WIFEXITED(st) ? "exit " : "signal ",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), out);
    return -1;
}

int prog_netfence_apply(const char *script, char *why, size_t whylen)
{
    static const char *const args[] = {"-f", "-", NULL};
    char msg[1024];
    return nft_run(args, script, msg, sizeof(msg), why, whylen);
}

int prog_netfence_lock_uid(unsigned uid)
{
    char lock[128];
    snprintf(lock, sizeof(lock), PROG_NETFENCE_LOCK_DIR "/gantry-sandbox-uid-%u.lock", uid);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return -2;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
    close(fd);
    return -1;
}

int prog_netfence_reap(unsigned own_uid, char *why, size_t whylen)
{
    static const char *const args[] = {"list", "table", "inet", "gantry", NULL};
    size_t cap = 1 << 20;
    char *list = xmalloc(cap);
    if (nft_run(args, NULL, list, cap, why, whylen) != 0) {
        free(list);
        return -1;
    }
    int reaped = 0;
    for (char *p = list; (p = strstr(p, "chain slot_"));) {
        p += strlen("chain slot_");
        char *end;
        unsigned long uid = strtoul(p, &end, 10);
        if (end == p || *end != ' ' || uid == own_uid || uid < PROG_NETFENCE_UID_MIN || uid > PROG_NETFENCE_UID_MAX) continue;
        int fd = prog_netfence_lock_uid((unsigned)uid);
        if (fd < 0) continue; /* its worker runs (or the lock cannot be checked): its own */
        char w[300];
        if (prog_netfence_teardown((unsigned)uid, w, sizeof(w)) == 0) reaped++;
        close(fd);
    }
    free(list);
    return reaped;
}

static int run(char *script, char *why, size_t whylen)
{
    int rc = script ? prog_netfence_apply(script, why, whylen) : -1;
    free(script);
    return rc;
}

int prog_netfence_setup(unsigned uid, char *why, size_t whylen)
{
    if (uid < PROG_NETFENCE_UID_MIN || uid > PROG_NETFENCE_UID_MAX) {
        snprintf(why, whylen, "the sandbox uid %u is outside the ranks' range [%u, %u]", uid, PROG_NETFENCE_UID_MIN,
                 PROG_NETFENCE_UID_MAX);
        return -1;
    }
    if (geteuid() != 0) {
        snprintf(why, whylen, "the worker does not run as root: it cannot write nftables rules");
        return -1;
    }
    return run(prog_netfence_script_setup(uid), why, whylen);
}

int prog_netfence_job(unsigned uid, const char *job_id, const char *const *peers, size_t n, char *why, size_t whylen)
{
    /* host names (an --advertise-host given as a name) become their addresses */
    char addrs[PROG_NETFENCE_MAX_PEERS * 4][INET6_ADDRSTRLEN];
    const char *list[PROG_NETFENCE_MAX_PEERS * 4];
    size_t k = 0;
    for (size_t i = 0; i < n && i < PROG_NETFENCE_MAX_PEERS; i++) {
        unsigned char a[16];
        if (inet_pton(AF_INET, peers[i], a) == 1 || inet_pton(AF_INET6, peers[i], a) == 1) {
            snprintf(addrs[k], sizeof(addrs[k]), "%s", peers[i]);
            list[k] = addrs[k];
            k++;
            continue;
        }
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
        int e = getaddrinfo(peers[i], NULL, &hints, &res);
        if (e != 0) {
            snprintf(why, whylen, "peer %.100s: %s", peers[i], gai_strerror(e));
            return -1;
        }
        for (struct addrinfo *ai = res; ai && k < PROG_NETFENCE_MAX_PEERS * 4; ai = ai->ai_next) {
            const void *src = ai->ai_family == AF_INET ? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
                                                       : (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
            if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
                inet_ntop(ai->ai_family, src, addrs[k], sizeof(addrs[k]))) {
                list[k] = addrs[k];
                k++;
            }
        }
        freeaddrinfo(res);
    }
    return run(prog_netfence_script_job(uid, prog_netfence_job_mark(job_id), list, k, why, whylen), why, whylen);
}

int prog_netfence_idle(unsigned uid, char *why, size_t whylen)
{
    return run(prog_netfence_script_setup(uid), why, whylen);
}

int prog_netfence_teardown(unsigned uid, char *why, size_t whylen)
{
    return run(prog_netfence_script_teardown(uid), why, whylen);
}
