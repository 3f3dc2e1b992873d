/* gantry-scheduler: reads gantry:jobs with a consumer group and places jobs on
 * workers by the rules of policy.h.
 *
 * Nothing is lost: an entry is acknowledged only in the atomic step that puts it
 * in the workers' task lists (dispatch.c); a scheduler that starts (or takes over)
 * reads the group's unacknowledged entries again.  Several schedulers may run:
 * a lease in Redis (gantry:leader, SET NX PX, renewed by its holder) makes one
 * active; the others wait and take over within K_LEADER_TTL_MS of its death.  All
 * use one consumer name, so the new leader's backlog read sees its predecessor's
 * pending entries. */
#include "common/clock.h"
#include "common/alloc.h"
#include "common/config.h"
#include "common/ids.h"
#include "common/jobtypes.h"
#include "wire/keys.h"
#include "common/log.h"
#include "wire/lua_scripts.h"
#include "wire/redis_sync.h"
#include "wire/requeue.h"
#include "scheduler/autoscaler.h"
#include "scheduler/dispatch.h"
#include "scheduler/elastic.h"
#include "scheduler/policy.h"
#include "scheduler/queue.h"
#include "scheduler/registry.h"

#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONSUMER "scheduler" /* shared by every scheduler: only the leader reads */
#define MAX_TENANTS 1024
#define ELASTIC_GATHER_US 2000000
#define SCHED_WINDOW_MIN 32   /* jobs per list of the queue decided (and given a wait reason) every round, at least */
#define CANCEL_SWEEP_MAX 2048 /* queued jobs beyond the window checked for a cancellation every 2 s */
#define READ_COUNT 256        /* entries per XREADGROUP */
#define SCHED_READ_MAX 4096   /* entries read from gantry:jobs before a round (a burst is decided once) */

/* whether a requeued elastic generation should wait for its predecessor's workers: while one of
 * them still runs the job, unless the predecessor ended by a failure (a member is lost: waiting
 * for it would only delay the survivors) */
static bool gather(rs_conn *r, const registry *reg, const task_msg *t)
{
    bool busy = false;
    for (int w = 0; w < reg->n && !busy; w++)
        busy = !reg->w[w].free && strcmp(reg->w[w].job_id, t->job_id) == 0;
    if (!busy) return false;
    redisReply *m = rs_command(r, "GET %s%s:%d", K_RETRY_PREFIX, t->job_id, t->attempt - 1);
    bool failure = m && m->type == REDIS_REPLY_STRING && strcmp(m->str, "failure") == 0;
    freeReplyObject(m);
    return !failure;
}

static config_opt opts[] = {
    CONFIG_OPT("redis", "Redis address host:port", "127.0.0.1:6380"),
    REDIS_AUTH_OPTS, /* redis-user, redis-password-file, redis-password (wire/redis_auth.h) */
    CONFIG_OPT("name", "this scheduler's name in logs and in the leader lease (default: generated)", ""),
    CONFIG_OPT("max-attempts", "how many times a job may run when the workers running it die", "3"),
    CONFIG_OPT("autoscaler",
               "inference autoscaling policy: faro-fairsum, faro-sum, faro-fair, fairshare, oneshot, hpa, aiad, "
               "mark, ray-serve or kpa",
               "faro-fairsum"),
    CONFIG_OPT("autoscale-quantile", "Faro: the quantile of the predicted load it provisions for", "0.8"),
    CONFIG_OPT("autoscale-control-s", "Faro / MArk: seconds between optimisation rounds (a reactive loop runs between)", "300"),
    CONFIG_OPT("autoscale-period-min", "seasonal period of request rates in minutes for the predictor (0: none)", "1440"),
    CONFIG_OPT("autoscale-drop-penalty", "Faro: weight of the optional drop-rate term in the objective (0: off)", "0"),
    CONFIG_OPT("autoscale-predictor", "Faro's forecaster: seasonal (seasonal quantile) or holt (Holt's smoothing)", "seasonal"),
    CONFIG_OPT("log-level", "debug, info, warn or error", "info"),
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))
#define OPT(name) config_get(opts, NOPTS, name)

static volatile sig_atomic_t stopping;
static char name[64];

typedef struct {
    char id[48];
    pol_tenant t;
} tenant_conf;

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

/* a failure is logged; the next XREADGROUP then says NOGROUP and this runs again */
static void ensure_group(rs_conn *r)
{
    rs_group_create(r, K_JOBS_STREAM, K_SCHED_GROUP, "0");
    rs_group_create(r, K_WAKE_STREAM, K_SCHED_GROUP, "$");
}

/* takes or renews the lease; true while we are the leader */
static bool lead(rs_conn *r, bool leader)
{
    redisReply *rep = leader ? rs_command(r, "EVAL %s 1 %s %s %d", lua_leader_renew, K_LEADER, name, K_LEADER_TTL_MS)
                             : rs_command(r, "SET %s %s NX PX %d", K_LEADER, name, K_LEADER_TTL_MS);
    bool ok = rep && ((rep->type == REDIS_REPLY_INTEGER && rep->integer == 1) ||
                      (rep->type == REDIS_REPLY_STATUS && strcmp(rep->str, "OK") == 0));
    freeReplyObject(rep);
    return ok;
}

/* reads entries; from_id "0" pages through pending entries, ">" waits for new ones (block_ms < 0:
 * does not wait).  Returns the number of jobs read, -1 on error; *last gets the last id (for paging). */
static int read_jobs(rs_conn *r, sched_queue *q, const char *from_id, int block_ms, char *last)
{
    /* new entries: jobs and wake-ups in one blocking read; the backlog (ID 0): jobs only */
    bool live = strcmp(from_id, ">") == 0;
    redisReply *rep = !live ? rs_command(r, "XREADGROUP GROUP %s %s COUNT %d BLOCK %d STREAMS %s %s", K_SCHED_GROUP, CONSUMER,
                                         READ_COUNT, block_ms, K_JOBS_STREAM, from_id)
                      : block_ms < 0 ? rs_command(r, "XREADGROUP GROUP %s %s COUNT %d STREAMS %s %s > >", K_SCHED_GROUP, CONSUMER,
                                                  READ_COUNT, K_JOBS_STREAM, K_WAKE_STREAM)
                                     : rs_command(r, "XREADGROUP GROUP %s %s COUNT %d BLOCK %d STREAMS %s %s > >", K_SCHED_GROUP,
                                                  CONSUMER, READ_COUNT, block_ms, K_JOBS_STREAM, K_WAKE_STREAM);
    if (!rep) return -1;
    if (rep->type == REDIS_REPLY_ERROR) { /* logged by rs_command */
        if (strncmp(rep->str, "NOGROUP", 7) == 0) ensure_group(r);
        freeReplyObject(rep);
        return -1;
    }
    int count = 0;
    for (size_t st = 0; rep->type == REDIS_REPLY_ARRAY && st < rep->elements; st++) {
        redisReply *entries = rep->element[st]->element[1];
        if (strcmp(rep->element[st]->element[0]->str, K_WAKE_STREAM) == 0) {
            for (size_t i = 0; i < entries->elements; i++) /* a wake-up only ends the wait */
                redisAppendCommand(r->c, "XACK %s %s %s", K_WAKE_STREAM, K_SCHED_GROUP, entries->element[i]->element[0]->str);
            for (size_t i = 0; i < entries->elements; i++) /* an unacknowledged wake-up is read again: harmless */
                freeReplyObject(rs_get_reply(r, "XACK"));
            continue;
        }
        for (size_t i = 0; i < entries->elements; i++) {
            redisReply *e = entries->element[i];
            const char *id = e->element[0]->str;
            snprintf(last, 64, "%s", id);
            count++;
            redisReply *fields = e->element[1];
            const char *raw = NULL;
            for (size_t f = 0; fields->type == REDIS_REPLY_ARRAY && f + 1 < fields->elements; f += 2)
                if (strcmp(fields->element[f]->str, F_JOB) == 0) raw = fields->element[f + 1]->str;
            task_msg t;
            if (!raw || msg_task_decode(raw, &t) != 0) {
                log_warn("dropping malformed gantry:jobs entry %s", id);
                dispatch_drop(r, id);
                continue;
            }
            sq_push(q, id, xstrdup(raw), &t);
        }
    }
    freeReplyObject(rep);
    return count;
}

/* tenant weights and quotas, as the server publishes them */
static int read_tenants(rs_conn *r, tenant_conf *out)
{
    redisReply *rep = rs_command(r, "HGETALL %s", K_TENANTS_HASH);
    int n = 0;
    for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i + 1 < rep->elements && n < MAX_TENANTS; i += 2) {
        json_t *j = json_loads(rep->element[i + 1]->str, 0, NULL);
        tenant_conf *t = &out[n++];
        snprintf(t->id, sizeof(t->id), "%s", rep->element[i]->str);
        json_t *w = json_object_get(j, "weight"), *m = json_object_get(j, "max_slots");
        t->t = (pol_tenant){t->id, json_is_number(w) && json_number_value(w) > 0 ? json_number_value(w) : 1.0,
                            json_is_integer(m) ? (int)json_integer_value(m) : -1};
        json_decref(j);
    }
    freeReplyObject(rep);
    return n;
}

/* drops the given queued jobs that were cancelled meanwhile (one pipelined round trip); dispatch checks
 * again atomically.  The entries must be distinct. */
static void drop_cancelled(rs_conn *r, sched_queue *q, sched_entry **es, size_t n)
{
    if (n == 0 || !rs_ensure(r)) return;
    bool *gone = xcalloc(n, sizeof(bool));
    for (size_t i = 0; i < n; i++)
        redisAppendCommand(r->c, "EXISTS %s%s", K_CANCEL_PREFIX, es[i]->task.job_id);
    for (size_t i = 0; i < n; i++) {
        redisReply *rep = rs_get_reply(r, "EXISTS");
        if (!rep) { /* the connection is gone: the next sweep asks again */
            free(gone);
            return;
        }
        gone[i] = rep->type == REDIS_REPLY_INTEGER && rep->integer == 1;
        freeReplyObject(rep);
    }
    for (size_t i = 0; i < n; i++) {
        if (!gone[i]) continue;
        log_info("job %s was cancelled before placement", es[i]->task.job_id);
        dispatch_drop(r, es[i]->entry_id);
        sq_remove(q, es[i]);
    }
    free(gone);
}

/* whether a queued entry may wait this round as a requeued elastic generation gathering its
 * predecessor's workers (decided with gather()); such entries do not count toward a list's window */
static bool may_hold(const sched_entry *e, void *now_us)
{
    return e->max_slots > e->task.slots && e->task.attempt > 0 && *(int64_t *)now_us - e->arrived_us < ELASTIC_GATHER_US;
}

/* Every 2 s: the cancellations of the jobs a round looks at (the window), and of up to
 * CANCEL_SWEEP_MAX more taken in turn from the rest of the queue, so that none stays for long. */
static void sweep_cancelled(rs_conn *r, sched_queue *q, size_t per_list, int64_t now)
{
    size_t n;
    sched_entry **win = sq_window(q, per_list, may_hold, &now, &n);
    drop_cancelled(r, q, win, n);
    free(win);
    sched_entry **more = xmalloc(sizeof(*more) * CANCEL_SWEEP_MAX);
    drop_cancelled(r, q, more, sq_sweep(q, CANCEL_SWEEP_MAX, more));
    free(more);
}

/* The victim's job learns why it stops (its events say "preempted by ..."): the preempting job by
 * name only when it is the same tenant's; another tenant's job id is not the victim's to see. */
static void signal_preemption(rs_conn *r, const reg_worker *victim, const pol_job *for_job)
{
    char by[96];
    if (strcmp(victim->tenant, for_job->tenant) == 0)
        snprintf(by, sizeof(by), "job %s", for_job->job_id);
    else
        snprintf(by, sizeof(by), "another tenant's job");
    if (requeue_ask(r, victim->job_id, victim->attempt, by) == 1)
        log_info("preempting job %s on worker %s for job %s", victim->job_id, victim->id, for_job->job_id);
}

/* One round of decisions.  The policy sees the window of the queue (queue.h): from the head of every
 * list of same-shaped jobs, as many as the free workers plus one, and at least SCHED_WINDOW_MIN, so
 * that it places exactly what it would place looking at the whole queue, at a cost that does not grow
 * with the queue (docs/control-plane.md, "How the queue is indexed").  Jobs behind a window keep the
 * last reason published for them until they reach it. */
static void schedule(rs_conn *r, sched_queue *q, registry *reg)
{
    static int64_t last_sweep;
    if (q->len == 0 || registry_refresh(r, reg) != 0) return;
    size_t nfree = 0;
    for (int i = 0; i < reg->n; i++)
        nfree += reg->w[i].free;
    size_t per_list = nfree + 1 > SCHED_WINDOW_MIN ? nfree + 1 : SCHED_WINDOW_MIN;
    int64_t now = clock_mono_us();
    if (now - last_sweep > 2000000) {
        sweep_cancelled(r, q, per_list, now);
        last_sweep = now;
    }
    size_t n = 0;
    sched_entry **win = q->len ? sq_window(q, per_list, may_hold, &now, &n) : NULL;
    if (!win) return;
    static tenant_conf tenants[MAX_TENANTS];
    int nt = read_tenants(r, tenants);
    pol_tenant *pt = xmalloc(sizeof(*pt) * (size_t)(nt + 1));
    for (int i = 0; i < nt; i++)
        pt[i] = tenants[i].t;
    pol_worker *pw = xmalloc(sizeof(*pw) * (size_t)(reg->n + 1));
    for (int i = 0; i < reg->n; i++) {
        reg_worker *w = &reg->w[i];
        pw[i] = (pol_worker){
            w->free, w->free ? NULL : w->tenant,  w->free ? NULL : w->job_id, w->priority,    w->preemptible,
            0,       w->site[0] ? w->site : NULL, !w->free && w->serving,     w->serving_min, w->site_key[0] ? w->site_key : NULL};
    }
    pol_job *pj = xmalloc(sizeof(*pj) * n);
    pol_decision *d = xmalloc(sizeof(*d) * n);
    pol_preemption *pre = xmalloc(sizeof(*pre) * (size_t)(reg->n + 1));
    for (size_t i = 0; i < n; i++) {
        sched_entry *e = win[i];
        task_msg *t = &e->task;
        /* a requeued elastic gang waits (at most a moment) until its previous generation's workers are
         * free again: placed at once it would get only min of them and resize again and again */
        bool hold = may_hold(e, &now) && gather(r, reg, t);
        pj[i] = (pol_job){t->job_id,
                          t->tenant,
                          t->priority,
                          t->slots,
                          e->max_slots,
                          hold,
                          e->seq,
                          e->sites,
                          e->sites ? e->nsites : 0,
                          (job_type_traits(t->type) & JT_BACKFILL) != 0, /* short jobs (placement) may backfill */
                          e->sites ? e->site_keys : NULL};
    }
    int npre = 0;
    int64_t t0 = clock_mono_us();
    int placed = policy_decide_claim(pj, (int)n, pw, reg->n, pt, nt, d, pre, &npre, &reg->claim);
    int64_t decided = clock_mono_us() - t0;
    size_t queued = q->len;
    for (int p = 0; p < npre; p++)
        signal_preemption(r, &reg->w[pre[p].worker], &pj[pre[p].for_job]);

    /* every write of the round in one pipeline: wait reasons that changed, then the placements */
    bool *done = xcalloc(n, sizeof(bool));
    int *sent = xcalloc(n, sizeof(int)); /* 1 note, 2 dispatch */
    for (size_t i = 0; i < n; i++) {
        sched_entry *e = win[i];
        if (d[i].action == POL_WAIT) {
            if (strcmp(e->waiting, d[i].reason) != 0 && dispatch_note_send(r, e->task.job_id, d[i].reason) == 0) sent[i] = 1;
            continue;
        }
        const char *ids[POL_MAX_GANG];
        for (int k = 0; k < d[i].nworkers; k++)
            ids[k] = reg->w[d[i].workers[k]].id;
        if (dispatch_send(r, e, ids, d[i].nworkers) == 0) sent[i] = 2;
    }
    for (size_t i = 0; i < n; i++) {
        sched_entry *e = win[i];
        if (sent[i] == 1) {
            if (dispatch_note_recv(r) == 0) snprintf(e->waiting, sizeof(e->waiting), "%s", d[i].reason);
            continue;
        }
        if (sent[i] != 2) continue;
        dispatch_result res = dispatch_recv(r, e->task.job_id);
        if (res == DISPATCH_ERROR) continue; /* stays queued: the next round tries again (the claim makes it safe) */
        if (res == DISPATCH_CANCELLED) {
            log_info("job %s was cancelled before placement", e->task.job_id);
        } else if (res == DISPATCH_OK) {
            for (int k = 0; k < d[i].nworkers; k++)
                registry_assign(reg, d[i].workers[k], &e->task);
            log_info("job %s (attempt %d, %d slot%s) -> %s", e->task.job_id, e->task.attempt, d[i].nworkers,
                     d[i].nworkers == 1 ? "" : "s", reg->w[d[i].workers[0]].id);
        } else {
            log_info("job %s attempt %d was already placed; duplicate acknowledged", e->task.job_id, e->task.attempt);
        }
        done[i] = true;
    }
    free(sent);
    for (size_t i = 0; i < n; i++)
        if (done[i]) sq_remove(q, win[i]);
    if (placed) /* the benchmark reads these lines (tests/bench/bench_sched.py) */
        log_debug("round: queued=%zu workers=%d placed=%d decide_us=%lld round_us=%lld window=%zu", queued, reg->n, placed,
                  (long long)decided, (long long)(clock_mono_us() - t0), n);
    free(done);
    free(pt);
    free(pw);
    free(pj);
    free(d);
    free(pre);
    free(win);
}

/* reads every pending entry of the group again (start, takeover, after an outage) */
static int recover(rs_conn *r, sched_queue *q)
{
    ensure_group(r);
    sq_free(q);
    char last[64] = "0";
    int n;
    while ((n = read_jobs(r, q, last, 0, last)) > 0)
        ;
    if (n < 0) return -1;
    log_info("leader: recovered %zu unplaced jobs from the stream", q->len);
    return 0;
}

int main(int argc, char **argv)
{
    json_set_alloc_funcs(xmalloc, free); /* jansson never returns NULL for memory (common/alloc.h) */
    log_init("scheduler");
    int rc = config_parse(argc, argv, opts, NOPTS, "gantry-scheduler",
                          "Places jobs from gantry:jobs on workers: priorities, fair share, quotas, gangs, preemption.");
    if (rc != 0) return rc < 0 ? 2 : 0;
    if (strcmp(OPT("log-level"), "debug") == 0) log_set_level(LOG_DEBUG);
    if (OPT("name")[0])
        snprintf(name, sizeof(name), "%s", OPT("name"));
    else
        id_random("s", 6, name, sizeof(name));
    redis_auth rauth;
    if (redis_auth_from_options(&rauth, OPT("redis-user"), OPT("redis-password"), OPT("redis-password-file")) != 0) return 2;
    rs_conn r;
    if (rs_init(&r, OPT("redis"), &rauth) != 0) {
        log_error("--redis must be host:port");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int predictor = as_predictor_parse(OPT("autoscale-predictor"));
    if (predictor < 0) {
        log_error("--autoscale-predictor: seasonal or holt, not '%s'", OPT("autoscale-predictor"));
        return 2;
    }
    as_params asp = {atof(OPT("autoscale-quantile")),
                     atoi(OPT("autoscale-period-min")),
                     atof(OPT("autoscale-control-s")),
                     0,
                     NULL,
                     0,
                     predictor,
                     atof(OPT("autoscale-drop-penalty"))};
    autoscaler *as = autoscaler_create(OPT("autoscaler"), &asp);
    if (!as) {
        log_error("--autoscaler: unknown policy '%s'", OPT("autoscaler"));
        return 2;
    }
    elastic *el = elastic_create();
    static registry reg;
    reg.max_attempts = atoi(OPT("max-attempts")) > 0 ? atoi(OPT("max-attempts")) : K_MAX_ATTEMPTS;
    sched_queue q;
    sq_init(&q);
    bool leader = false, fresh = true;
    char last[64];
    log_info("scheduler %s started; redis %s", name, OPT("redis"));
    while (!stopping) {
        if (!rs_ensure(&r)) {
            usleep(100000);
            fresh = true; /* after an outage, re-read the pending entries */
            continue;
        }
        bool was = leader;
        leader = lead(&r, leader);
        if (leader != was) log_info("%s", leader ? "became the leader" : "lost the leader lease; standing by");
        if (!leader) {
            sq_free(&q);
            fresh = true;
            usleep(K_LEADER_TTL_MS * 1000 / 6);
            continue;
        }
        if (fresh) {
            if (recover(&r, &q) != 0) continue;
            fresh = false;
        }
        /* sleeps until a job arrives or a worker frees a slot (gantry:wake), at most a third of the lease */
        int got = read_jobs(&r, &q, ">", K_LEADER_TTL_MS / 3, last);
        for (int total = got; got >= READ_COUNT && total < SCHED_READ_MAX; total += got)
            got = read_jobs(&r, &q, ">", -1, last); /* the rest of a burst, without waiting: one round for it */
        if (got < 0) {
            fresh = true;
            continue;
        }
        schedule(&r, &q, &reg);
        if (q.len == 0) registry_refresh(&r, &reg); /* lost workers are noticed even when idle */
        autoscaler_tick(as, &r, &reg, (double)clock_mono_us() / 1e6);
        elastic_tick(el, &r, &reg, q.len, (double)clock_mono_us() / 1e6);
    }
    if (leader && !rs_do(&r, "EVAL %s 1 %s %s", lua_leader_release, K_LEADER, name))
        log_warn("could not release the leader lease (Redis): the next scheduler takes it when it expires");
    log_info("stopped (%zu jobs left unplaced, still pending in the stream)", q.len);
    sq_free(&q);
    autoscaler_free(as);
    elastic_free(el);
    rs_close(&r);
    return 0;
}
