/* gantry-worker: one process per slot (a GPU, or a CPU slot).
 *
 * Registers in Redis, heartbeats from a thread, takes tasks from its list with a
 * reliable move (BLMOVE into its in-flight list, removed only after the final
 * event is published), runs the executor for the job type and publishes
 * running / progress / result events to gantry:events.
 *
 * SIGTERM / SIGINT: the worker hands its task back and exits, in about a second
 * whatever it runs: the executor stops at its next poll for a stop (a training step,
 * a federated exchange, a replica's control check every 0.5 s), as a preempted task
 * does, and the task goes back to gantry:jobs (a training job continues from the
 * checkpoint written at that step; a lost inference replica is replaced by the
 * autoscaler).  A gang's other members stop at the same step and leave the requeue
 * to it.  A placement, which has no poll, finishes (it takes seconds).  While
 * stopping, Redis gets two seconds per write: a task whose hand-back or result
 * cannot be written stays in the in-flight list, to be given back when a worker
 * with this id starts again or the scheduler declares this one dead.
 *
 * Tenant limits (the task's "limits", server/limits.h): every time an executor polls
 * for a stop, the worker also checks the job's running time (this generation plus the
 * earlier ones, gantry:runtime:<job>; not for inference) and how much its own resident
 * memory grew since the task started; over either, the job fails with the reason and
 * is never requeued. */
#include "common/clock.h"
#include "common/alloc.h"
#include "common/config.h"
#include "common/ids.h"
#include "common/jobtypes.h"
#include "wire/keys.h"
#include "common/log.h"
#include "wire/lua_scripts.h"
#include "common/paths.h"
#include "wire/redis_sync.h"
#include "wire/requeue.h"
#include "workers/executor.h"
#include "workers/program/prog_netfence.h"
#include "workers/rendezvous.h"
#include "workers/site_key.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static config_opt opts[] = {
    CONFIG_OPT("redis", "Redis address host:port", "127.0.0.1:6380"),
    REDIS_AUTH_OPTS, /* redis-user, redis-password-file, redis-password (wire/redis_auth.h) */
    CONFIG_OPT("id", "worker id (default: generated w_<hex>)", ""),
    CONFIG_OPT("labels", "comma-separated key=value labels, e.g. site=a,zone=1", ""),
    CONFIG_OPT("kind", "cpu or gpu (GPU workers need a build with the gpu feature)", "cpu"),
    CONFIG_OPT("state",
               "directory for checkpoints and the model store (shared by all workers: a gang resumes from it; default: "
               "/var/lib/gantry/workers as root, else $XDG_STATE_HOME/gantry/workers or ~/.local/state/gantry/workers)",
               ""),
    CONFIG_OPT("advertise-host", "address other workers reach this one at (multi-worker training listens there)", "127.0.0.1"),
    CONFIG_OPT("max-attempts", "attempts of a job when its worker is lost (as the scheduler's)", "3"),
    CONFIG_OPT("memory", "memory this slot offers, in bytes (0: the machine's)", "0"),
    CONFIG_OPT("threads", "CPU threads a replica's model may use (TorchScript's intra-op pool; 0: the machine's cores)", "0"),
    CONFIG_OPT("sandbox-uid",
               "uid and gid this slot's program ranks run as, in [1879048192, 1879113727] and its own on the host (0: derived "
               "from --id)",
               "0"),
    CONFIG_OPT("program-network",
               "fenced: a program rank reaches only its own job's peers (nftables, needs root; program jobs are refused "
               "without it); open: programs run with the host's network when the fence cannot be made",
               "fenced"),
    CONFIG_OPT("log-level", "debug, info, warn or error", "info"),
    CONFIG_OPT("fed-secret",
               "file with the cluster secret that authenticates federated sites' keys (mode 600, the same on every worker, "
               "never in Redis; empty: this worker runs no federated site)",
               ""),
    CONFIG_OPT("site-key",
               "file with this worker's federated identity key (Ed25519, PEM, mode 600; --make-site-key makes one): it runs "
               "the sites whose spec pins its public key, and signs their messages (empty: none)",
               ""),
    CONFIG_OPT("print-site-key", "print the public key of this identity key file (ed25519:<base64>) and exit", ""),
    CONFIG_OPT("make-site-key", "make this identity key file (mode 600) unless it exists, print its public key and exit", ""),
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))
#define OPT(name) config_get(opts, NOPTS, name)

/* Shared between threads (docs/errors.md, "Threads"): the signal handler sets stopping, the task loop
 * (main) and the heartbeat thread read it; a lock-free atomic is both signal-safe and seen by every
 * thread, where volatile sig_atomic_t is only the former. */
static atomic_int stopping;
static char state_dir[PATH_MAX]; /* absolute: paths in results must mean the same thing to every process */
static char bin_dir[PATH_MAX];   /* this binary's directory (gantry-rank-init, gantry-replica) */
static char worker_id[40], source[96], info_json[2048];
static char site_label[64];            /* --labels site=NAME: the federated site this worker runs */
static unsigned char fed_secret[4096]; /* --fed-secret: the file's bytes, trailing white space dropped */
static unsigned sandbox_uid;           /* --sandbox-uid, or derived from the id */
static bool net_fenced;                /* this slot's nftables chain is in place (workers/program/prog_netfence.h) */
static char net_why[700];              /* why not */
static size_t fed_secret_len;
static unsigned char site_key[FED_SITEKEY_LEN]; /* --site-key: the raw Ed25519 private key */
static char site_key_text[FED_SITEKEY_TEXT];    /* its public key's text form ("" none) */
static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static char running_job[64];

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

static void set_running(const char *job)
{
    pthread_mutex_lock(&running_lock);
    snprintf(running_job, sizeof(running_job), "%s", job);
    pthread_mutex_unlock(&running_lock);
}

/* bumped by the heartbeat thread when we were fenced, read by the task loop (run_state.fence) */
static atomic_int fence_generation;
static int max_attempts = K_MAX_ATTEMPTS;

/* Registration and heartbeat in one script (wire/lua/worker_beat.lua).  After the
 * first registration a heartbeat only refreshes a hash that still exists: a missing hash
 * means the scheduler declared us dead (and gave our work to others) or Redis lost its
 * data.  Then we are fenced: the running task is abandoned without a result,
 * whatever is still in our lists is given back, and we register afresh. */
static int heartbeat(rs_conn *r, bool first)
{
    char running[64], hb[32], key[128], ttl[16];
    pthread_mutex_lock(&running_lock);
    snprintf(running, sizeof(running), "%s", running_job);
    pthread_mutex_unlock(&running_lock);
    snprintf(hb, sizeof(hb), "%lld", (long long)clock_now_ms());
    snprintf(key, sizeof(key), "%s%s", K_WORKER_PREFIX, worker_id);
    snprintf(ttl, sizeof(ttl), "%d", K_WORKER_TTL_MS);
    redisReply *rep = rs_command(r, "EVAL %s 2 %s %s %s %s %s %s %s %s %s", lua_worker_beat, key, K_WORKERS_SET, info_json, hb,
                                 running[0] ? "1" : "0", running, ttl, first ? "1" : "0", worker_id);
    int rc = rep && rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -1;
    freeReplyObject(rep);
    return rc; /* 1 alive, 0 fenced, -1 Redis unreachable */
}

static void *heartbeat_thread(void *arg)
{
    rs_conn *r = arg;
    bool first = true;
    while (!stopping) {
        int rc = heartbeat(r, first);
        if (rc == 1) first = false;
        if (rc == 0) {
            fence_generation++;
            log_warn("worker %s: registration vanished (declared dead, or Redis lost its data); abandoning the "
                     "running task and registering again",
                     worker_id);
            requeue_worker_tasks(r, worker_id, max_attempts, "its worker lost its registration");
            first = true;
            continue;
        }
        for (int i = 0; i < 10 && !stopping; i++)
            usleep(K_HEARTBEAT_MS * 100);
    }
    return NULL;
}

/* while stopping, Redis gets this many tries 100 ms apart per write before the worker gives up */
#define STOPPING_TRIES 20

/* publishes until Redis takes it: an event is never dropped while the worker lives.
 * While stopping it gives up after STOPPING_TRIES (false).  With a task (a job's final
 * event), the task also leaves the in-flight list in the same step
 * (wire/lua/worker_finish.lua): a worker killed between the two would otherwise leave a
 * finished task there, given back and run again when it starts again. */
static bool publish_ex(rs_conn *r, const event_msg *e, const char *task)
{
    char *s = msg_event_encode(e);
    if (!s) { /* never drop a state change: fall back to a plain reason */
        event_msg plain = *e;
        snprintf(plain.reason, sizeof(plain.reason), "(the reason could not be encoded)");
        plain.result = NULL;
        plain.metrics = NULL;
        s = msg_event_encode(&plain);
        log_error("event for %s could not be encoded; sent without its reason/result", e->job_id);
    }
    if (!s) return true;
    int stopping_tries = 0;
    bool ok = false;
    for (int attempt = 0;; attempt++) {
        redisReply *rep;
        if (task) {
            char inflight[128], maxlen[16];
            snprintf(inflight, sizeof(inflight), "%s%s", K_INFLIGHT_PREFIX, worker_id);
            snprintf(maxlen, sizeof(maxlen), "%d", K_STREAM_MAXLEN);
            rep = rs_command(r, "EVAL %s 2 %s %s %s %s %s", lua_worker_finish, K_EVENTS_STREAM, inflight, maxlen, s, task);
            ok = rep && rep->type == REDIS_REPLY_INTEGER;
        } else {
            rep = rs_command(r, "XADD %s MAXLEN ~ %d * %s %s", K_EVENTS_STREAM, K_STREAM_MAXLEN, F_EVENT, s);
            ok = rep && rep->type == REDIS_REPLY_STRING;
        }
        freeReplyObject(rep);
        if (ok) break;
        if (stopping && ++stopping_tries >= STOPPING_TRIES) {
            log_warn("stopping: could not publish the event for %s", e->job_id);
            break;
        }
        if (attempt % 50 == 0) log_warn("cannot publish event for %s yet; retrying", e->job_id);
        usleep(100000);
    }
    free(s);
    return ok;
}

static bool publish(rs_conn *r, const event_msg *e)
{
    return publish_ex(r, e, NULL);
}

/* STOP_LIMIT: over one of its tenant's limits (the job fails); STOP_ENDED: another worker
 * ended this generation for good (a gang's result, or a failure over a limit); STOP_REQUEUED:
 * this generation was already given back (by another member, or by the scheduler or a
 * restarted worker for a member that is gone): its next one is queued, so this one stops */
typedef enum { STOP_NONE, STOP_CANCELLED, STOP_PREEMPTED, STOP_FENCED, STOP_LIMIT, STOP_ENDED, STOP_REQUEUED } stop_reason;

typedef struct {
    rs_conn *r;
    int64_t last_progress_us;
    int fence; /* fence_generation when the task started */
    stop_reason stop;
    char preempted_by[64];
    int64_t started_us;  /* when this generation started here (monotonic) */
    int64_t prior_ms;    /* what the job's earlier generations ran (gantry:runtime:<job>) */
    long long rss0;      /* this process's resident bytes when the task started; -1: unknown */
    char limit_why[256]; /* STOP_LIMIT: the limit and by how much, in words */
} run_state;

/* this process's resident memory in bytes (/proc/self/statm), -1 when unknown */
static long long rss_bytes(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *p = strchr(buf, ' '); /* size, then resident (pages) */
    return p ? strtoll(p + 1, NULL, 10) * (long long)sysconf(_SC_PAGESIZE) : -1;
}

/* 1 GiB, 2.1 GiB, 812 KiB */
static void fmt_bytes(long long b, char *out, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 5)
        v /= 1024, u++;
    if (u == 0 || v == (double)(long long)v)
        snprintf(out, len, "%lld %s", (long long)v, units[u]);
    else
        snprintf(out, len, "%.1f %s", v, units[u]);
}

/* Runtime counts for every job type but serving ones (inference: replicas serve until cancelled). */
static bool runtime_counts(const task_msg *t)
{
    return t->max_runtime_s > 0 && !(job_type_traits(t->type) & JT_SERVING);
}

/* what the job's earlier generations ran, in ms */
static int64_t runtime_before(rs_conn *r, const task_msg *t)
{
    if (!runtime_counts(t) || t->attempt == 0) return 0;
    redisReply *rep = rs_command(r, "HGETALL %s%s", K_RUNTIME_PREFIX, t->job_id);
    int64_t ms = 0;
    for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i + 1 < rep->elements; i += 2)
        if (atoi(rep->element[i]->str) < t->attempt) ms += strtoll(rep->element[i + 1]->str, NULL, 10);
    freeReplyObject(rep);
    return ms;
}

/* this generation ends unfinished (requeued): the next one starts from what it ran */
static void runtime_record(rs_conn *r, const task_msg *t, const run_state *st)
{
    if (!runtime_counts(t)) return;
    long long ms = (clock_mono_us() - st->started_us) / 1000;
    /* not written (rs_do logged why): the next generation's runtime limit misses this one's time */
    if (rs_do(r, "HSET %s%s %d %lld", K_RUNTIME_PREFIX, t->job_id, t->attempt, ms))
        rs_do(r, "EXPIRE %s%s %d", K_RUNTIME_PREFIX, t->job_id, 7 * 86400);
}

/* the job has ended: its runtime record goes (only a requeued job has one) */
static void runtime_forget(rs_conn *r, const task_msg *t)
{
    /* not deleted: the record expires on its own (7 days) */
    if (runtime_counts(t) && t->attempt > 0) rs_do(r, "DEL %s%s", K_RUNTIME_PREFIX, t->job_id);
}

/* whether the task is over one of its tenant's limits; the reason goes to st->limit_why */
static bool over_limit(const task_msg *t, run_state *st)
{
    int64_t ran_ms = st->prior_ms + (clock_mono_us() - st->started_us) / 1000;
    if (runtime_counts(t) && ran_ms > t->max_runtime_s * 1000) {
        snprintf(st->limit_why, sizeof(st->limit_why), "exceeded the tenant's max runtime of %lld s (max_runtime_s): ran %.1f s%s",
                 (long long)t->max_runtime_s, (double)ran_ms / 1000.0, st->prior_ms ? " over all its generations" : "");
        return true;
    }
    long long rss = t->max_memory_bytes > 0 && st->rss0 >= 0 ? rss_bytes() : -1;
    if (rss >= 0 && rss - st->rss0 > t->max_memory_bytes) {
        char grew[32], limit[32];
        fmt_bytes(rss - st->rss0, grew, sizeof(grew));
        fmt_bytes(t->max_memory_bytes, limit, sizeof(limit));
        snprintf(st->limit_why, sizeof(st->limit_why), "worker memory grew by %s, over the tenant's limit of %s (max_memory_bytes)",
                 grew, limit);
        return true;
    }
    return false;
}

/* Over a limit: this generation ends for good.  The retry marker is set first, so that a
 * gang's other members (stopped at the same step by this member's vote, or seeing the
 * marker) never requeue it.  When it was set already, the generation was requeued or
 * ended by another member: this one stops without a word. */
static void limit_stop(exec_ctx *ctx)
{
    run_state *st = ctx->opaque;
    st->stop = requeue_mark_done(st->r, ctx->task->job_id, ctx->task->attempt) == 0 ? STOP_ENDED : STOP_LIMIT;
}

/* Plain progress: at most two events a second.  Points with metrics (the curves)
 * at most twenty a second; evaluation points and the last one always pass. */
static void publish_progress(exec_ctx *ctx, double fraction, const char *message, const json_t *metrics)
{
    run_state *st = ctx->opaque;
    event_msg e;
    msg_event_init(&e, ctx->task->job_id, source);
    e.progress = fraction;
    snprintf(e.reason, sizeof(e.reason), "%s", message ? message : "");
    snprintf(e.worker, sizeof(e.worker), "%s", worker_id);
    e.metrics = (json_t *)metrics; /* borrowed: not cleared */
    publish(st->r, &e);
}

static void on_progress(exec_ctx *ctx, double fraction, const char *message, const json_t *metrics)
{
    run_state *st = ctx->opaque;
    int64_t now = clock_mono_us();
    /* a search's trial: a point with the search's metric always passes (server/search.c decides on it) */
    const char *trial_metric = json_string_value(json_object_get(json_object_get(ctx->task->spec, "trial"), "metric"));
    bool must = fraction >= 1.0 || (metrics && (json_object_get(metrics, "test_accuracy") || json_object_get(metrics, "event") ||
                                                (trial_metric && json_object_get(metrics, trial_metric))));
    if (!must && now - st->last_progress_us < (metrics ? 50000 : 500000)) return;
    st->last_progress_us = now;
    publish_progress(ctx, fraction, message, metrics);
}

/* a note says what happens, not how far the job is: no progress (-1), so that a job's
 * progress is never reset to a false 0% by one */
static void on_note(exec_ctx *ctx, const char *message)
{
    publish_progress(ctx, -1, message, NULL);
}

/* SIGTERM: the task stops as a preempted one does and goes back to the queue (by
 * STOP_BY, below).  A gang's other members are asked to stop at the same generation
 * (they see the request at their next poll and requeue nothing: the first requeue of a
 * generation is the only one).  Gangs only (JT_GANG): an inference job's other replicas serve on. */
#define STOP_BY "stop:"
static void stop_handing_back(exec_ctx *ctx)
{
    run_state *st = ctx->opaque;
    st->stop = STOP_PREEMPTED;
    snprintf(st->preempted_by, sizeof(st->preempted_by), STOP_BY "%s", worker_id);
    if (ctx->task->slots > 1 && (job_type_traits(ctx->task->type) & JT_GANG))
        requeue_ask(st->r, ctx->task->job_id, ctx->task->attempt, st->preempted_by);
}

/* whether the task must stop now, and why (executors poll this) */
static bool on_cancelled(exec_ctx *ctx)
{
    run_state *st = ctx->opaque;
    if (st->stop != STOP_NONE) return true;
    if (fence_generation != st->fence) {
        st->stop = STOP_FENCED;
        return true;
    }
    if (over_limit(ctx->task, st)) {
        limit_stop(ctx);
        return true;
    }
    redisReply *rep = rs_command(st->r, "MGET %s%s %s%s:%d %s%s:%d", K_CANCEL_PREFIX, ctx->task->job_id, K_PREEMPT_PREFIX,
                                 ctx->task->job_id, ctx->task->attempt, K_RETRY_PREFIX, ctx->task->job_id, ctx->task->attempt);
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 3) {
        if (rep->element[0]->type == REDIS_REPLY_STRING) {
            st->stop = STOP_CANCELLED;
        } else if (rep->element[2]->type == REDIS_REPLY_STRING && strcmp(rep->element[2]->str, "done") == 0) {
            st->stop = STOP_ENDED; /* another member reported the result, or failed the job over a limit */
        } else if (rep->element[1]->type == REDIS_REPLY_STRING) {
            st->stop = STOP_PREEMPTED;
            snprintf(st->preempted_by, sizeof(st->preempted_by), "%s", rep->element[1]->str);
        } else if (rep->element[2]->type == REDIS_REPLY_STRING) {
            st->stop = STOP_REQUEUED; /* e.g. a member's worker stopped before it joined: no waiting for it */
        }
    }
    freeReplyObject(rep);
    if (st->stop == STOP_NONE && stopping) stop_handing_back(ctx);
    return st->stop != STOP_NONE;
}

/* requeue_task until Redis takes it (while stopping: STOPPING_TRIES); 1 requeued, 0 already
 * requeued or ended by another, -1 not written */
static int requeue_until_written(rs_conn *r, const char *raw, int attempts, const char *why)
{
    int rc, tries = 0;
    while ((rc = requeue_task(r, raw, attempts, why, source, worker_id)) < 0) {
        if (stopping && ++tries >= STOPPING_TRIES) break;
        usleep(100000);
    }
    return rc;
}

/* a preempted task goes back to gantry:jobs (attempt + 1) with a "queued" event; for a
 * gang, once, whichever member gets there first (requeue.h).  false: not written (stopping,
 * Redis unreachable): the task must stay in the in-flight list */
static bool requeue_preempted(rs_conn *r, const char *raw, const task_msg *t, const char *by)
{
    char why[400];
    if (strcmp(by, "resize") == 0) /* an elastic gang asked to grow (scheduler/elastic.c) */
        snprintf(why, sizeof(why), "resize: stopped at a checkpoint to continue with more workers");
    else if (strncmp(by, STOP_BY, strlen(STOP_BY)) == 0) /* SIGTERM here or to a member of the gang */
        snprintf(why, sizeof(why), "handed back: worker %s is stopping", by + strlen(STOP_BY));
    else
        snprintf(why, sizeof(why), "preempted by %s (higher priority)", by); /* "job j_..." or "another tenant's job" */
    int rc = requeue_until_written(r, raw, 0, why);
    if (rc < 0)
        log_warn("job %s: %s, but Redis is unreachable: it stays in this worker's in-flight list", t->job_id, why);
    else
        log_info("job %s: %s; %s", t->job_id, why, rc == 1 ? "requeued" : "already requeued");
    return rc >= 0;
}

/* a gang member lost a peer: the job goes back as its next generation (once, by whichever member gets there first);
 * attempts: the failures allowed (the executor's exec_ctx.max_failures, else --max-attempts) */
static bool requeue_retry(rs_conn *r, const char *raw, const task_msg *t, int attempts, const char *why)
{
    int rc = requeue_until_written(r, raw, attempts, why);
    log_warn("job %s: %s (%s)", t->job_id, why,
             rc == 1   ? "requeued it"
             : rc == 0 ? "already requeued by another member"
                       : "not requeued: Redis is unreachable");
    return rc >= 0;
}

static bool rdv_stop(void *arg)
{
    exec_ctx *ctx = arg;
    return ctx->cancelled(ctx);
}

static int on_gang_put(exec_ctx *ctx, const char *field, const char *value)
{
    run_state *st = ctx->opaque;
    return rdv_put(st->r, ctx->task->job_id, ctx->task->attempt, field, value);
}

static int on_gang_get(exec_ctx *ctx, const char *field, int timeout_ms, char *out, size_t outlen, char *err, size_t errlen)
{
    run_state *st = ctx->opaque;
    return rdv_get(st->r, ctx->task->job_id, ctx->task->attempt, field, timeout_ms, rdv_stop, ctx, out, outlen, err, errlen);
}

static int on_rendezvous(exec_ctx *ctx, int world, const char *addr, int timeout_ms, rdv_members *out, char *err, size_t errlen)
{
    run_state *st = ctx->opaque;
    return rdv_join(st->r, ctx->task->job_id, ctx->task->attempt, world, addr, worker_id, timeout_ms, rdv_stop, ctx, out, err,
                    errlen);
}

/* runs one task; false when the task must stay in the in-flight list (stopping, and its
 * hand-back or result could not be written) */
static bool run_task(rs_conn *r, const char *raw)
{
    task_msg t;
    event_msg e;
    bool done = true;
    if (msg_task_decode(raw, &t) != 0) {
        log_error("dropping a malformed task: %.120s", raw);
        return true;
    }
    set_running(t.job_id);
    /* what this worker kept for another job goes first: the memory limit measures this job alone */
    executor_release(t.job_id);
    malloc_trim(0);
    run_state st = {.r = r, .fence = fence_generation, .stop = STOP_NONE, .started_us = clock_mono_us(), .rss0 = rss_bytes()};
    st.prior_ms = runtime_before(r, &t);
    exec_ctx ctx = {.task = &t,
                    .progress = on_progress,
                    .note = on_note,
                    .cancelled = on_cancelled,
                    .state_dir = state_dir,
                    .rendezvous = on_rendezvous,
                    .gang_put = on_gang_put,
                    .gang_get = on_gang_get,
                    .advertise_host = OPT("advertise-host")[0] ? OPT("advertise-host") : "127.0.0.1", /* never empty */
                    .redis = r,
                    .worker_id = worker_id,
                    .worker_kind = OPT("kind"),
                    .opaque = &st,
                    .site = site_label,
                    .fed_secret = fed_secret_len ? fed_secret : NULL,
                    .fed_secret_len = fed_secret_len,
                    .site_key = site_key_text[0] ? site_key : NULL,
                    .site_key_text = site_key_text,
                    .threads = atoi(OPT("threads")) > 0 ? atoi(OPT("threads")) : (int)sysconf(_SC_NPROCESSORS_ONLN),
                    .bin_dir = bin_dir,
                    .sandbox_uid = sandbox_uid,
                    .net_fenced = net_fenced,
                    .net_open = strcmp(OPT("program-network"), "open") == 0,
                    .net_why = net_why};
    json_t *result = NULL;
    char err[4096] = "";
    int rc = -1;
    int64_t t0 = clock_mono_us();
    if (!on_cancelled(&ctx)) {
        msg_event_init(&e, t.job_id, source);
        snprintf(e.worker, sizeof(e.worker), "%s", worker_id);
        snprintf(e.state, sizeof(e.state), "running");
        snprintf(e.reason, sizeof(e.reason), "started on worker %s%s", worker_id, t.attempt ? " (a retry)" : "");
        publish(r, &e);
        const executor *ex = executor_find(t.type);
        rc = ex ? ex->run(&ctx, &result, err, sizeof(err)) : EXEC_FAILED;
        if (!ex) snprintf(err, sizeof(err), "this worker has no executor for job type '%s'", t.type);
        if (rc != EXEC_OK && rc != EXEC_SILENT && st.stop == STOP_NONE)
            on_cancelled(&ctx); /* did it fail because it was told to stop (or ran over a limit)? */
        else if (rc == EXEC_OK && st.stop == STOP_NONE && over_limit(&t, &st))
            limit_stop(&ctx); /* finished, but past a limit (a placement has no step to stop at) */
    }
    switch (st.stop) {
    case STOP_LIMIT: /* fails, never requeued; what it used is freed, so the worker goes on at its old size */
        json_decref(result);
        executor_release(NULL);
        malloc_trim(0);
        msg_event_init(&e, t.job_id, source);
        snprintf(e.worker, sizeof(e.worker), "%s", worker_id);
        snprintf(e.state, sizeof(e.state), "failed");
        snprintf(e.reason, sizeof(e.reason), "%s", st.limit_why);
        done = publish_ex(r, &e, raw);
        runtime_forget(r, &t);
        log_warn("job %s failed: %s", t.job_id, st.limit_why);
        break;
    case STOP_ENDED:
        log_info("job %s: this generation was ended by another worker", t.job_id);
        json_decref(result);
        if (st.limit_why[0]) runtime_record(r, &t, &st); /* over a limit after a peer requeued it: the next one counts on */
        break;
    case STOP_REQUEUED:
        log_info("job %s: this generation was already given back; stopping", t.job_id);
        runtime_record(r, &t, &st);
        json_decref(result);
        break;
    case STOP_FENCED:
        log_warn("job %s abandoned: this worker was fenced (its task was given back)", t.job_id);
        runtime_record(r, &t, &st);
        json_decref(result);
        break;
    case STOP_CANCELLED:
        log_info("job %s stopped: cancelled", t.job_id);
        runtime_forget(r, &t);
        json_decref(result);
        break;
    case STOP_PREEMPTED:
        if (rc != EXEC_OK || !result) {
            runtime_record(r, &t, &st);
            done = requeue_preempted(r, raw, &t, st.preempted_by);
            json_decref(result);
            break;
        }
        /* it finished anyway: report the result */
        /* fall through */
    case STOP_NONE:
        if (rc == EXEC_SILENT) { /* a gang member: rank 0 reports the job */
            log_info("job %s: this member's part is done", t.job_id);
            json_decref(result);
            break;
        }
        if (rc == EXEC_RETRY) {
            runtime_record(r, &t, &st);
            done = requeue_retry(r, raw, &t, ctx.max_failures > 0 ? ctx.max_failures : max_attempts, err);
            json_decref(result);
            break;
        }
        /* a gang's outcome is final: no member's requeue may run it again */
        if (t.slots > 1) requeue_mark_done(r, t.job_id, t.attempt);
        msg_event_init(&e, t.job_id, source);
        snprintf(e.worker, sizeof(e.worker), "%s", worker_id);
        snprintf(e.state, sizeof(e.state), "%s", rc == 0 ? "succeeded" : "failed");
        if (rc == 0) {
            char took[24];
            clock_duration((double)(clock_mono_us() - t0) / 1000.0, took, sizeof(took));
            snprintf(e.reason, sizeof(e.reason), "finished in %s", took);
        } else
            snprintf(e.reason, sizeof(e.reason), "%s", err);
        e.result = result;
        done = publish_ex(r, &e, raw);
        runtime_forget(r, &t);
        log_info("job %s %s (%s)", t.job_id, e.state, e.reason);
        msg_event_clear(&e);
        break;
    }
    set_running("");
    msg_task_clear(&t);
    return done;
}

/* whether the task is still in our in-flight list: a worker stalled past its heartbeat
 * TTL may wake up holding a task the scheduler has already given to another worker */
static bool still_ours(rs_conn *r, const char *inflight, const char *raw, size_t len)
{
    redisReply *rep = rs_command(r, "LPOS %s %b", inflight, raw, len);
    bool ours = !rep || rep->type == REDIS_REPLY_INTEGER; /* unreachable Redis: run it, the fence still guards */
    freeReplyObject(rep);
    return ours;
}

static void build_info(void)
{
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    json_t *labels = json_object();
    char *list = xstrdup(OPT("labels")), *save = NULL;
    for (char *kv = strtok_r(list, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq) {
            *eq = '\0';
            json_object_set_new(labels, kv, json_string(eq + 1));
            if (strcmp(kv, "site") == 0) snprintf(site_label, sizeof(site_label), "%s", eq + 1);
        }
    }
    free(list);
    long long mem = strtoll(OPT("memory"), NULL, 10);
    if (mem <= 0) mem = (long long)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE);
    json_t *info = json_pack("{s:s, s:s, s:i, s:i, s:I, s:o}", "kind", OPT("kind"), "host", host, "pid", (int)getpid(), "slots", 1,
                             "memory_bytes", (json_int_t)mem, "labels", labels);
    if (site_key_text[0]) json_object_set_new(info, "site_key", json_string(site_key_text)); /* GET /v1/workers shows it */
    char *s = json_dumps(info, JSON_COMPACT);
    snprintf(info_json, sizeof(info_json), "%s", s);
    free(s);
    json_decref(info);
}

/* --fed-secret: a regular file others cannot read, 16 bytes or more (docs/operations.md); 0, or -1 logged.  (Group
 * bits are allowed: Kubernetes secret volumes with an fsGroup are group-readable.) */
static int load_fed_secret(const char *path)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) != 0) {
        log_error("--fed-secret %s: %s", path, strerror(errno));
        if (f) fclose(f);
        return -1;
    }
    size_t len = S_ISREG(sb.st_mode) ? fread(fed_secret, 1, sizeof(fed_secret), f) : 0;
    int more = fgetc(f) != EOF;
    fclose(f);
    while (len > 0 && (fed_secret[len - 1] == '\n' || fed_secret[len - 1] == '\r' || fed_secret[len - 1] == ' '))
        len--;
    if (!S_ISREG(sb.st_mode) || (sb.st_mode & 007)) {
        log_error("--fed-secret %s: must be a regular file that others cannot read (chmod 600 %s)", path, path);
        return -1;
    }
    if (len < 16 || more) {
        log_error("--fed-secret %s: must hold 16 to %zu bytes (e.g. openssl rand -hex 32 > %s)", path, sizeof(fed_secret), path);
        return -1;
    }
    fed_secret_len = len;
    return 0;
}

/* --site-key: the identity key and its public key's text form; 0, or -1 logged */
static int load_site_key(const char *path)
{
    char why[600];
    unsigned char pub[FED_SITEKEY_LEN];
    if (site_key_load(path, site_key, why, sizeof why) || fed_sitekey_public(site_key, pub)) {
        log_error("--site-key %s", why);
        return -1;
    }
    fed_sitekey_format(pub, site_key_text);
    log_info("federated site key %s (--site-key %s): a spec's sites[i].public_key pins a site to this worker", site_key_text, path);
    return 0;
}

/* --print-site-key FILE, --make-site-key FILE: the public key on stdout; the exit status */
static int site_key_command(const char *path, bool make)
{
    char why[600], text[FED_SITEKEY_TEXT];
    unsigned char priv[FED_SITEKEY_LEN], pub[FED_SITEKEY_LEN];
    bool exists = access(path, F_OK) == 0;
    int rc = make && !exists ? site_key_make(path, priv, why, sizeof why) : site_key_load(path, priv, why, sizeof why);
    if (rc == 0 && fed_sitekey_public(priv, pub) != 0) rc = -1, snprintf(why, sizeof why, "%s: not a usable key", path);
    OPENSSL_cleanse(priv, sizeof priv);
    if (rc) {
        fprintf(stderr, "gantry-worker: %s\n", why);
        return 1;
    }
    fed_sitekey_format(pub, text);
    printf("%s\n", text);
    return 0;
}

/* --sandbox-uid and --program-network: the uid program ranks run as, and their network fence (set up now:
 * a restart after a crash replaces what the last run left); 0, or -1 logged */
static int setup_sandbox(void)
{
    char *end;
    unsigned long uid = strtoul(OPT("sandbox-uid"), &end, 10);
    if (*end || (uid != 0 && (uid < PROG_NETFENCE_UID_MIN || uid > PROG_NETFENCE_UID_MAX))) {
        log_error("--sandbox-uid %s: must be 0 (derived from --id) or in [%u, %u]", OPT("sandbox-uid"), PROG_NETFENCE_UID_MIN,
                  PROG_NETFENCE_UID_MAX);
        return -1;
    }
    /* one worker per uid on a host: a lock file per uid, held while the worker runs; a derived uid taken by
     * another worker moves on to the next one */
    sandbox_uid = uid ? (unsigned)uid : prog_netfence_default_uid(worker_id);
    for (int tries = 0;; tries++) {
        int fd = prog_netfence_lock_uid(sandbox_uid); /* held until the process ends (the descriptor stays open) */
        if (fd >= 0) break;
        if (fd == -2) {
            log_warn("cannot open a lock file in " PROG_NETFENCE_LOCK_DIR ": this worker cannot tell whether another one of this "
                     "host uses uid %u",
                     sandbox_uid);
            break;
        }
        if (uid || tries >= 64) {
            log_error("--sandbox-uid %u: another worker of this host runs its program ranks as that uid", sandbox_uid);
            return -1;
        }
        sandbox_uid = sandbox_uid == PROG_NETFENCE_UID_MAX ? PROG_NETFENCE_UID_MIN : sandbox_uid + 1;
    }
    const char *mode = OPT("program-network");
    if (strcmp(mode, "fenced") != 0 && strcmp(mode, "open") != 0) {
        log_error("--program-network %s: must be fenced or open", mode);
        return -1;
    }
    net_fenced = prog_netfence_setup(sandbox_uid, net_why, sizeof(net_why)) == 0;
    char why[300];
    int reaped = net_fenced ? prog_netfence_reap(sandbox_uid, why, sizeof(why)) : 0;
    if (reaped > 0)
        log_info("removed the network rules of %d worker slot%s no worker holds any more", reaped, reaped == 1 ? "" : "s");
    if (net_fenced)
        log_info("program ranks run as uid %u; their network is fenced to their job's peers (nftables table inet gantry)",
                 sandbox_uid);
    else if (strcmp(mode, "open") == 0)
        log_warn("program ranks run as uid %u with the host's network, NOT fenced (--program-network open): %s", sandbox_uid,
                 net_why);
    else
        log_warn("program jobs will be refused: their network cannot be fenced (%s); --program-network open runs them "
                 "unfenced",
                 net_why);
    return 0;
}

int main(int argc, char **argv)
{
    json_set_alloc_funcs(xmalloc, free); /* jansson never returns NULL for memory (common/alloc.h) */
    log_init("worker");
    int rc = config_parse(argc, argv, opts, NOPTS, "gantry-worker", "Runs gantry tasks for one slot.");
    if (rc != 0) return rc < 0 ? 2 : 0;
    if (OPT("print-site-key")[0]) return site_key_command(OPT("print-site-key"), false);
    if (OPT("make-site-key")[0]) return site_key_command(OPT("make-site-key"), true);
    if (OPT("id")[0])
        snprintf(worker_id, sizeof(worker_id), "%s", OPT("id"));
    else
        id_random("w", 6, worker_id, sizeof(worker_id));
    snprintf(source, sizeof(source), "worker:%s", worker_id);
    if (OPT("site-key")[0] && load_site_key(OPT("site-key")) != 0) return 2; /* before the info, which shows its public key */
    build_info();
    char state_want[PATH_MAX];
    snprintf(state_want, sizeof(state_want), "%s", OPT("state"));
    if (!state_want[0] && path_default_state("workers", state_want, sizeof(state_want)) != 0) {
        log_error("no --state given and no default state directory (HOME is not set)");
        return 2;
    }
    if (path_mkdirs(state_want) != 0 || !realpath(state_want, state_dir)) {
        log_error("cannot use the state directory %s: %s", state_want, strerror(errno));
        return 1;
    }
    ssize_t exe = readlink("/proc/self/exe", bin_dir, sizeof(bin_dir) - 1);
    if (exe > 0) {
        bin_dir[exe] = '\0';
        char *slash = strrchr(bin_dir, '/');
        if (slash) *slash = '\0';
    }
    max_attempts = atoi(OPT("max-attempts")) > 0 ? atoi(OPT("max-attempts")) : K_MAX_ATTEMPTS;
    if (OPT("fed-secret")[0] && load_fed_secret(OPT("fed-secret")) != 0) return 2;
    if (setup_sandbox() != 0) return 2;

    redis_auth rauth;
    if (redis_auth_from_options(&rauth, OPT("redis-user"), OPT("redis-password"), OPT("redis-password-file")) != 0) return 2;
    rs_conn r, hb;
    if (rs_init(&r, OPT("redis"), &rauth) != 0 || rs_init(&hb, OPT("redis"), &rauth) != 0) {
        log_error("--redis must be host:port");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* a previous process with this id may have died holding tasks: they go back first */
    while (!stopping && requeue_worker_tasks(&hb, worker_id, max_attempts, "worker restarted") < 0)
        usleep(200000);
    pthread_t thread;
    pthread_create(&thread, NULL, heartbeat_thread, &hb);
    log_info("worker %s (%s) started; redis %s", worker_id, OPT("kind"), OPT("redis"));

    char tasks[128], inflight[128];
    bool kept_task = false; /* stopping left a task in the in-flight list */
    snprintf(tasks, sizeof(tasks), "%s%s", K_TASKS_PREFIX, worker_id);
    snprintf(inflight, sizeof(inflight), "%s%s", K_INFLIGHT_PREFIX, worker_id);
    while (!stopping) {
        redisReply *rep = rs_command(&r, "BLMOVE %s %s RIGHT LEFT 1", tasks, inflight);
        if (!rep) {
            usleep(100000);
            continue;
        }
        if (rep->type == REDIS_REPLY_STRING && !still_ours(&r, inflight, rep->str, rep->len)) {
            log_warn("a task moved to us was given back meanwhile (this worker was stalled); skipping it");
        } else if (rep->type == REDIS_REPLY_STRING && !run_task(&r, rep->str)) {
            kept_task = true;
        } else if (rep->type == REDIS_REPLY_STRING) {
            /* only now is the task done: remove it from the in-flight list */
            redisReply *rem;
            for (int tries = 0; !(rem = rs_command(&r, "LREM %s 1 %b", inflight, rep->str, rep->len));)
                if (stopping && ++tries >= STOPPING_TRIES)
                    break;
                else
                    usleep(100000);
            freeReplyObject(rem);
            /* a slot is free: wake the scheduler */
            /* not written: the scheduler sees the free slot at its next round anyway (a third of its lease) */
            rs_do(&r, "XADD %s MAXLEN ~ 10000 * w %s", K_WAKE_STREAM, worker_id);
        }
        freeReplyObject(rep);
    }
    pthread_join(thread, NULL);
    /* Unregistered first, so that the scheduler sends nothing more; then a task it sent meanwhile,
     * or one whose hand-back could not be written, goes back.  Redis unreachable: the registration
     * expires and the scheduler gives them back (or a worker with this id, when it starts). */
    redisReply *unreg = rs_command(&hb, "SREM %s %s", K_WORKERS_SET, worker_id);
    if (unreg) {
        rs_do(&hb, "DEL %s%s", K_WORKER_PREFIX, worker_id); /* not deleted: it expires with the heartbeat TTL */
        requeue_worker_tasks(&hb, worker_id, 0, kept_task ? "handed back: its worker stopped" : "its worker stopped");
    }
    freeReplyObject(unreg);
    rs_close(&r);
    rs_close(&hb);
    if (net_fenced && prog_netfence_teardown(sandbox_uid, net_why, sizeof(net_why)) != 0)
        log_warn("could not remove this slot's network rules: %s", net_why);
    log_info("worker %s stopped", worker_id);
    return 0;
}
