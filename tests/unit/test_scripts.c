/* test_scripts.c - every Redis script (wire/lua/NAME.lua, embedded as lua_NAME) against a real
 * redis-server that this program starts on a free port in a temporary directory: each script
 * is loaded, run on prepared keys, and its result and the keys it leaves are checked, failure
 * paths included (a duplicate or cancelled dispatch, a requeue past max attempts, a fenced
 * heartbeat, a full queue, a rendezvous with every rank taken, a worker's lists that changed).
 * requeue and dispatch run through their C callers (wire/requeue.c, scheduler/dispatch.c),
 * so the arguments the product computes are tested too. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wire/keys.h"
#include "wire/lua_scripts.h"
#include "wire/msg.h"
#include "wire/rdv_wire.h"
#include "wire/redis_sync.h"
#include "wire/requeue.h"
#include "scheduler/dispatch.h"

#define START_DEADLINE_MS 10000

static pid_t redis_pid;
static char dir[64];
static rs_conn R;

/* ---- the redis-server of this test ---- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int start_redis(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/gantry-scripts-XXXXXX");
    int port = free_port();
    if (!mkdtemp(dir) || port <= 0) return -1;
    char ports[16], log[128];
    snprintf(ports, sizeof(ports), "%d", port);
    snprintf(log, sizeof(log), "%s/redis.log", dir);
    redis_pid = fork();
    if (redis_pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        execlp("redis-server", "redis-server", "--port", ports, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
               dir, "--logfile", log, (char *)NULL);
        _exit(127);
    }
    if (redis_pid < 0) return -1;
    char hostport[32];
    snprintf(hostport, sizeof(hostport), "127.0.0.1:%d", port);
    if (rs_init(&R, hostport, NULL) != 0) return -1;
    for (long long deadline = now_ms() + START_DEADLINE_MS; now_ms() < deadline;) {
        redisContext *c = redisConnect("127.0.0.1", port);
        redisReply *pong = c && !c->err ? redisCommand(c, "PING") : NULL;
        bool up = pong && pong->type == REDIS_REPLY_STATUS && strcmp(pong->str, "PONG") == 0;
        freeReplyObject(pong);
        if (c) redisFree(c);
        if (up) return 0;
        if (waitpid(redis_pid, NULL, WNOHANG) == redis_pid) break; /* it exited: no redis-server, or the port was taken */
        usleep(20000);
    }
    fprintf(stderr, "test_scripts: redis-server did not answer on port %d (see %s)\n", port, log);
    return -1;
}

static int stop_redis(void **state)
{
    (void)state;
    rs_close(&R);
    if (redis_pid > 0) {
        kill(redis_pid, SIGTERM);
        waitpid(redis_pid, NULL, 0);
    }
    char log[128];
    snprintf(log, sizeof(log), "%s/redis.log", dir);
    unlink(log);
    rmdir(dir);
    return 0;
}

/* ---- helpers ---- */

static redisReply *cmd(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(R.c, fmt, ap);
    va_end(ap);
    assert_non_null(rep);
    return rep;
}

static void flush(void **state)
{
    (void)state;
    assert_true(rs_ensure(&R));
    freeReplyObject(cmd("FLUSHALL"));
}

static int setup(void **state)
{
    flush(state);
    return 0;
}

/* the integer a command answers */
static long long cmd_int(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(R.c, fmt, ap);
    va_end(ap);
    assert_non_null(rep);
    if (rep->type != REDIS_REPLY_INTEGER) fail_msg("%s: not an integer (%s)", fmt, rep->type == REDIS_REPLY_ERROR ? rep->str : "?");
    long long n = rep->integer;
    freeReplyObject(rep);
    return n;
}

/* the string a command answers (malloc'd), NULL for nil */
static char *cmd_str(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *rep = redisvCommand(R.c, fmt, ap);
    va_end(ap);
    assert_non_null(rep);
    char *s = rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_STATUS ? strdup(rep->str) : NULL;
    if (rep->type != REDIS_REPLY_NIL && !s) fail_msg("%s: not a string", fmt);
    freeReplyObject(rep);
    return s;
}

/* EVAL script with numkeys, then keys and values, NULL-terminated; the reply */
static redisReply *eval(const char *script, const char *numkeys, ...)
{
    const char *argv[64] = {"EVAL", script, numkeys};
    int argc = 3;
    va_list ap;
    va_start(ap, numkeys);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && argc < 64;)
        argv[argc++] = a;
    va_end(ap);
    redisReply *rep = redisCommandArgv(R.c, argc, argv, NULL);
    assert_non_null(rep);
    if (rep->type == REDIS_REPLY_ERROR) fail_msg("script error: %s", rep->str);
    return rep;
}

static long long eval_i(redisReply *rep)
{
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    long long n = rep->integer;
    freeReplyObject(rep);
    return n;
}

/* the rendezvous hash at key through its one decoder (wire/rdv_wire.h), as a member reads it */
static void rdv_read(const char *key, rdv_state *st)
{
    redisReply *rep = redisCommand(R.c, "HGETALL %s", key);
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_ARRAY);
    assert_true(rep->elements <= RDV_MAX_FIELDS);
    const char *v[RDV_MAX_FIELDS];
    size_t lens[RDV_MAX_FIELDS];
    for (size_t i = 0; i < rep->elements; i++)
        v[i] = rep->element[i]->str, lens[i] = rep->element[i]->len;
    assert_int_equal(rdv_decode(rep->elements, v, lens, st), 0);
    freeReplyObject(rep);
}

/* a task as the server publishes it; its spec has what Redis's cjson would not keep */
static char *make_task(const char *job, const char *type, int attempt)
{
    task_msg t = {.priority = 1, .slots = 1, .attempt = attempt, .preemptible = 1};
    snprintf(t.job_id, sizeof(t.job_id), "%s", job);
    snprintf(t.tenant, sizeof(t.tenant), "t_1");
    snprintf(t.type, sizeof(t.type), "%s", type);
    t.spec = json_loads("{\"layers\":[],\"opts\":{},\"big\":12345678901234567,\"huge\":1e20,\"lr\":0.1,"
                        "\"third\":0.3333333333333333,\"name\":\"a/b \\u00e9\",\"nested\":[[],{},[1,2]]}",
                        0, NULL);
    assert_non_null(t.spec);
    char *s = msg_task_encode(&t);
    msg_task_clear(&t);
    assert_non_null(s);
    return s;
}

/* the n-th entry's field of a stream (0: the first), decoded by the caller; NULL when absent */
static char *stream_field(const char *stream, size_t n, const char *field)
{
    redisReply *rep = cmd("XRANGE %s - +", stream);
    char *out = NULL;
    if (rep->type == REDIS_REPLY_ARRAY && n < rep->elements) {
        redisReply *fields = rep->element[n]->element[1];
        for (size_t f = 0; f + 1 < fields->elements; f += 2)
            if (strcmp(fields->element[f]->str, field) == 0) out = strdup(fields->element[f + 1]->str);
    }
    freeReplyObject(rep);
    return out;
}

static void expect_event(size_t n, const char *job, const char *state, const char *reason_part)
{
    char *s = stream_field(K_EVENTS_STREAM, n, F_EVENT);
    assert_non_null(s);
    event_msg e;
    assert_int_equal(msg_event_decode(s, &e), 0);
    assert_string_equal(e.job_id, job);
    assert_string_equal(e.state, state);
    if (!strstr(e.reason, reason_part)) fail_msg("event reason '%s' lacks '%s'", e.reason, reason_part);
    msg_event_clear(&e);
    free(s);
}

/* ---- every script loads ---- */

static void test_all_load(void **state)
{
    (void)state;
    assert_true(lua_nscripts >= 12);
    for (int i = 0; i < lua_nscripts; i++) {
        redisReply *rep = cmd("SCRIPT LOAD %s", lua_scripts[i].text);
        if (rep->type != REDIS_REPLY_STRING) fail_msg("%s.lua does not load: %s", lua_scripts[i].name, rep->str);
        assert_int_equal(rep->len, 40);
        freeReplyObject(rep);
    }
}

/* ---- requeue (wire/requeue.c) ---- */

static void test_requeue_task(void **state)
{
    (void)state;
    char *raw = make_task("j_1", "training", 0);
    assert_int_equal(requeue_task(&R, raw, 3, "worker lost", "scheduler", "w1"), 1);

    /* the next attempt, with the spec exactly as it was */
    char *next = stream_field(K_JOBS_STREAM, 0, F_JOB);
    assert_non_null(next);
    task_msg before, after;
    assert_int_equal(msg_task_decode(raw, &before), 0);
    assert_int_equal(msg_task_decode(next, &after), 0);
    assert_int_equal(after.attempt, 1);
    assert_true(json_equal(before.spec, after.spec));
    assert_true(json_is_array(json_object_get(after.spec, "layers")));
    assert_true(json_is_integer(json_object_get(after.spec, "big")));
    assert_true(json_real_value(json_object_get(after.spec, "third")) == 0.3333333333333333);
    assert_true(json_real_value(json_object_get(after.spec, "huge")) == 1e20);
    msg_task_clear(&before);
    msg_task_clear(&after);
    free(next);
    expect_event(0, "j_1", "queued", "worker lost; requeued (failure 1 of 3 allowed)");
    char *mark = cmd_str("GET %s%s", K_RETRY_PREFIX, "j_1:0");
    assert_string_equal(mark, "failure");
    free(mark);
    char *failures = cmd_str("GET %sj_1", K_FAILURES_PREFIX);
    assert_string_equal(failures, "1");
    free(failures);
    assert_true(cmd_int("TTL %sj_1", K_FAILURES_PREFIX) > 0);
    free(raw);
}

static void test_requeue_task_once(void **state)
{
    (void)state;
    char *raw = make_task("j_1", "training", 0);
    assert_int_equal(requeue_task(&R, raw, 3, "first", "scheduler", "w1"), 1);
    assert_int_equal(requeue_task(&R, raw, 3, "second", "worker:w2", "w2"), 0); /* the marker is set */
    assert_int_equal(cmd_int("XLEN %s", K_JOBS_STREAM), 1);
    assert_int_equal(cmd_int("XLEN %s", K_EVENTS_STREAM), 1);
    char *failures = cmd_str("GET %sj_1", K_FAILURES_PREFIX);
    assert_string_equal(failures, "1");
    free(failures);
    free(raw);
}

static void test_requeue_task_past_max_attempts(void **state)
{
    (void)state;
    char *raw = make_task("j_1", "training", 2);
    freeReplyObject(cmd("SET %sj_1 2", K_FAILURES_PREFIX)); /* two failures before */
    assert_int_equal(requeue_task(&R, raw, 3, "worker lost", "scheduler", "w1"), 1);
    assert_int_equal(cmd_int("EXISTS %s", K_JOBS_STREAM), 0); /* not requeued */
    expect_event(0, "j_1", "failed", "worker lost (failure 3 of 3 allowed)");
    free(raw);
}

/* a job that moved on after a restart: its failures no longer count, so the next loss is failure 1 again */
static void test_requeue_forgive(void **state)
{
    (void)state;
    char *raw = make_task("j_1", "federated", 2);
    freeReplyObject(cmd("SET %sj_1 2", K_FAILURES_PREFIX));
    assert_int_equal(requeue_forgive(&R, "j_1"), 1);
    assert_int_equal(requeue_forgive(&R, "j_1"), 0); /* nothing left to forgive */
    assert_int_equal(requeue_task(&R, raw, 3, "worker lost", "scheduler", "w1"), 1);
    expect_event(0, "j_1", "queued", "worker lost; requeued");
    char *failures = cmd_str("GET %sj_1", K_FAILURES_PREFIX);
    assert_string_equal(failures, "1");
    free(failures);
    free(raw);
}

static void test_requeue_task_preempted(void **state)
{
    (void)state;
    char *raw = make_task("j_1", "training", 4);
    assert_int_equal(requeue_task(&R, raw, 0, "preempted by j_2", "worker:w1", "w1"), 1);
    char *mark = cmd_str("GET %sj_1:4", K_RETRY_PREFIX);
    assert_string_equal(mark, "requeued");
    free(mark);
    assert_int_equal(cmd_int("EXISTS %sj_1", K_FAILURES_PREFIX), 0); /* no failure */
    assert_true(cmd_int("TTL %sj_1:4", K_RETRY_PREFIX) > 0);
    expect_event(0, "j_1", "queued", "preempted by j_2; requeued");
    free(raw);
}

static void test_requeue_inference_replica(void **state)
{
    (void)state;
    char *raw = make_task("j_inf", "inference", 1);
    freeReplyObject(cmd("HSET %s j_inf %s", K_INFER_JOBS, raw));
    freeReplyObject(cmd("SET %sj_inf:1 j_other", K_PREEMPT_PREFIX));
    assert_int_equal(requeue_task(&R, raw, 3, "worker lost", "scheduler", "w1"), 1);
    assert_int_equal(cmd_int("EXISTS %s", K_JOBS_STREAM), 0);         /* the autoscaler starts another replica */
    assert_int_equal(cmd_int("EXISTS %sj_inf:1", K_RETRY_PREFIX), 0); /* it keeps its generation */
    assert_int_equal(cmd_int("EXISTS %sj_inf:1", K_PREEMPT_PREFIX), 0);
    expect_event(0, "j_inf", "", "the autoscaler starts another");
    free(raw);
}

static void test_requeue_not_a_task(void **state)
{
    (void)state;
    assert_int_equal(requeue_task(&R, "{\"job_id\":\"j_1\"}", 3, "why", "scheduler", "w1"), 0);
    assert_int_equal(cmd_int("DBSIZE"), 0);
}

static void test_requeue_worker_tasks(void **state)
{
    (void)state;
    char *running = make_task("j_run", "training", 0), *waiting = make_task("j_wait", "placement", 1);
    freeReplyObject(cmd("RPUSH %sw1 %s", K_INFLIGHT_PREFIX, running));
    freeReplyObject(cmd("RPUSH %sw1 %s not-a-task", K_TASKS_PREFIX, waiting));
    freeReplyObject(cmd("SADD %s w1 w2", K_WORKERS_SET));
    assert_int_equal(requeue_worker_tasks(&R, "w1", 3, "worker w1 lost"), 2);
    assert_int_equal(cmd_int("EXISTS %sw1 %sw1", K_INFLIGHT_PREFIX, K_TASKS_PREFIX), 0);
    assert_int_equal(cmd_int("SISMEMBER %s w1", K_WORKERS_SET), 0);
    assert_int_equal(cmd_int("SISMEMBER %s w2", K_WORKERS_SET), 1);
    /* the running one first */
    const char *jobs[] = {"j_run", "j_wait"};
    int attempts[] = {1, 2};
    for (size_t i = 0; i < 2; i++) {
        char *s = stream_field(K_JOBS_STREAM, i, F_JOB);
        task_msg t;
        assert_int_equal(msg_task_decode(s, &t), 0);
        assert_string_equal(t.job_id, jobs[i]);
        assert_int_equal(t.attempt, attempts[i]);
        msg_task_clear(&t);
        free(s);
        expect_event(i, jobs[i], "queued", "worker w1 lost; requeued");
    }
    /* a worker with nothing: 0, still removed from the set */
    freeReplyObject(cmd("SADD %s w3", K_WORKERS_SET));
    assert_int_equal(requeue_worker_tasks(&R, "w3", 3, "lost"), 0);
    assert_int_equal(cmd_int("SISMEMBER %s w3", K_WORKERS_SET), 0);
    free(running);
    free(waiting);
}

/* a federated generation that goes on without a lost site (requeue_tolerate): sites 1 and 2 of 3 with threshold 2 */
static void test_requeue_tolerated_site(void **state)
{
    (void)state;
    char *site = make_task("j_fed", "federated", 4);
    for (int i = 0; i < 3; i++) {
        char w[8];
        snprintf(w, sizeof w, "w%d", i);
        assert_int_equal(requeue_tolerate(&R, "j_fed", 4, w, i, 2), 0);
        freeReplyObject(cmd("RPUSH %s%s %s", K_INFLIGHT_PREFIX, w, site));
    }
    assert_true(cmd_int("TTL %sj_fed:4:live", K_FED_PREFIX) > 0);
    /* site 1 lost: 2 sites remain, the job is not requeued, an event says so */
    assert_int_equal(requeue_worker_tasks(&R, "w1", 3, "worker w1 lost"), 1);
    assert_int_equal(cmd_int("EXISTS %s", K_JOBS_STREAM), 0);
    expect_event(0, "j_fed", "", "site 1 dropped: the rounds go on with the other 2 sites (threshold 2)");
    assert_int_equal(cmd_int("HEXISTS %sj_fed:4:live w1", K_FED_PREFIX), 0);
    assert_int_equal(cmd_int("EXISTS %sj_fed:4", K_RETRY_PREFIX), 0); /* the generation goes on */
    /* the same worker's task again (it came back and gave up its lists): already dropped, nothing */
    freeReplyObject(cmd("RPUSH %sw1 %s", K_INFLIGHT_PREFIX, site));
    assert_int_equal(requeue_worker_tasks(&R, "w1", 3, "worker w1 lost"), 0);
    assert_int_equal(cmd_int("EXISTS %s", K_JOBS_STREAM), 0);
    /* site 2 lost: 1 site would remain, below the threshold: requeued as any generation */
    assert_int_equal(requeue_worker_tasks(&R, "w2", 3, "worker w2 lost"), 1);
    assert_int_equal(cmd_int("XLEN %s", K_JOBS_STREAM), 1);
    expect_event(1, "j_fed", "queued", "worker w2 lost; requeued (failure 1 of 3 allowed)");
    free(site);
}

/* site 0 reports the rounds: its loss requeues the generation, whatever the threshold */
static void test_requeue_tolerated_site_zero(void **state)
{
    (void)state;
    char *site = make_task("j_fed", "federated", 0);
    for (int i = 0; i < 4; i++) {
        char w[8];
        snprintf(w, sizeof w, "w%d", i);
        assert_int_equal(requeue_tolerate(&R, "j_fed", 0, w, i, 3), 0);
    }
    freeReplyObject(cmd("RPUSH %sw0 %s", K_INFLIGHT_PREFIX, site));
    assert_int_equal(requeue_worker_tasks(&R, "w0", 3, "worker w0 lost"), 1);
    assert_int_equal(cmd_int("XLEN %s", K_JOBS_STREAM), 1);
    expect_event(0, "j_fed", "queued", "worker w0 lost; requeued");
    free(site);
}

/* the lists changed between C's read and the script: -1, nothing touched */
static void test_requeue_worker_stale(void **state)
{
    (void)state;
    char *raw = make_task("j_1", "training", 0);
    freeReplyObject(cmd("RPUSH %sw1 %s", K_TASKS_PREFIX, raw));
    freeReplyObject(cmd("SADD %s w1", K_WORKERS_SET));
    char tasks[64], inflight[64];
    snprintf(tasks, sizeof(tasks), "%sw1", K_TASKS_PREFIX);
    snprintf(inflight, sizeof(inflight), "%sw1", K_INFLIGHT_PREFIX);
    /* C read both lists empty */
    assert_int_equal(eval_i(eval(lua_requeue_worker, "6", K_JOBS_STREAM, K_EVENTS_STREAM, K_INFER_JOBS, tasks, inflight,
                                 K_WORKERS_SET, "1000000", "604800", "3", "lost", "w1", "0", "0", NULL)),
                     -1);
    assert_int_equal(cmd_int("LLEN %s", tasks), 1);
    assert_int_equal(cmd_int("SISMEMBER %s w1", K_WORKERS_SET), 1);
    assert_int_equal(cmd_int("EXISTS %s %s", K_JOBS_STREAM, K_EVENTS_STREAM), 0);
    free(raw);
}

/* ---- dispatch (scheduler/dispatch.c) ---- */

/* a pending gantry:jobs entry of the scheduler's group, as the scheduler holds it */
static void make_entry(sched_entry *e, const char *job, const char *type, int max_slots)
{
    memset(e, 0, sizeof(*e));
    freeReplyObject(cmd("XGROUP CREATE %s %s $ MKSTREAM", K_JOBS_STREAM, K_SCHED_GROUP));
    e->raw = make_task(job, type, 0);
    char *id = cmd_str("XADD %s * %s %s", K_JOBS_STREAM, F_JOB, e->raw);
    snprintf(e->entry_id, sizeof(e->entry_id), "%s", id);
    free(id);
    freeReplyObject(cmd("XREADGROUP GROUP %s scheduler COUNT 10 STREAMS %s >", K_SCHED_GROUP, K_JOBS_STREAM));
    assert_int_equal(msg_task_decode(e->raw, &e->task), 0);
    e->max_slots = max_slots;
}

static void free_entry(sched_entry *e)
{
    free(e->raw);
    msg_task_clear(&e->task);
}

static long long pending(void)
{
    redisReply *rep = cmd("XPENDING %s %s", K_JOBS_STREAM, K_SCHED_GROUP);
    assert_int_equal(rep->type, REDIS_REPLY_ARRAY);
    long long n = rep->element[0]->integer;
    freeReplyObject(rep);
    return n;
}

static void test_dispatch_one(void **state)
{
    (void)state;
    sched_entry e;
    make_entry(&e, "j_1", "training", 0);
    const char *ids[] = {"w1"};
    assert_int_equal(pending(), 1);
    assert_int_equal(dispatch_to(&R, &e, ids, 1), DISPATCH_OK);
    assert_int_equal(pending(), 0);
    char *task = cmd_str("LINDEX %sw1 0", K_TASKS_PREFIX), *claim = cmd_str("GET %sj_1:0", K_CLAIM_PREFIX);
    assert_string_equal(task, e.raw);
    assert_string_equal(claim, "w1");
    free(task);
    free(claim);
    assert_int_equal(cmd_int("EXISTS %sj_1:0 %s %s", K_RDV_PREFIX, K_ELASTIC, K_INFER_JOBS), 0); /* no gang, not served */
    expect_event(0, "j_1", "scheduled", "assigned to worker w1");

    /* published twice (an outbox retry): the second is acknowledged, not run */
    sched_entry again;
    make_entry(&again, "j_1", "training", 0);
    const char *other[] = {"w2"};
    assert_int_equal(dispatch_to(&R, &again, other, 1), DISPATCH_DUPLICATE);
    assert_int_equal(pending(), 0);
    assert_int_equal(cmd_int("EXISTS %sw2", K_TASKS_PREFIX), 0);
    assert_int_equal(cmd_int("XLEN %s", K_EVENTS_STREAM), 1);
    free_entry(&e);
    free_entry(&again);
}

static void test_dispatch_cancelled(void **state)
{
    (void)state;
    sched_entry e;
    make_entry(&e, "j_1", "training", 0);
    freeReplyObject(cmd("SET %sj_1 1", K_CANCEL_PREFIX));
    const char *ids[] = {"w1"};
    assert_int_equal(dispatch_to(&R, &e, ids, 1), DISPATCH_CANCELLED);
    assert_int_equal(pending(), 0);
    assert_int_equal(cmd_int("EXISTS %sw1 %sj_1:0 %s", K_TASKS_PREFIX, K_CLAIM_PREFIX, K_EVENTS_STREAM), 0);
    free_entry(&e);
}

static void test_dispatch_gang(void **state)
{
    (void)state;
    sched_entry e;
    make_entry(&e, "j_g", "training", 0);
    const char *ids[] = {"w1", "w2", "w3"};
    assert_int_equal(dispatch_to(&R, &e, ids, 3), DISPATCH_OK);
    for (int i = 0; i < 3; i++)
        assert_int_equal(cmd_int("LLEN %s%s", K_TASKS_PREFIX, ids[i]), 1);
    char *world = cmd_str("HGET %sj_g:0 world", K_RDV_PREFIX);
    assert_string_equal(world, "3");
    free(world);
    char key[64];
    snprintf(key, sizeof(key), "%sj_g:0", K_RDV_PREFIX);
    rdv_state st;
    rdv_read(key, &st);
    assert_int_equal(st.world, 3);
    assert_true(cmd_int("PTTL %sj_g:0", K_RDV_PREFIX) > 0);
    assert_int_equal(cmd_int("EXISTS %s", K_ELASTIC), 0);
    expect_event(0, "j_g", "scheduled", "assigned to workers w1, w2, w3");
    free_entry(&e);
}

static void test_dispatch_elastic(void **state)
{
    (void)state;
    sched_entry e;
    make_entry(&e, "j_el", "training", 4); /* spec.workers {"min":1,"max":4}, on one worker for now */
    const char *ids[] = {"w1"};
    assert_int_equal(dispatch_to(&R, &e, ids, 1), DISPATCH_OK);
    char *world = cmd_str("HGET %sj_el:0 world", K_RDV_PREFIX), *max = cmd_str("HGET %s j_el", K_ELASTIC);
    assert_string_equal(world, "1");
    assert_string_equal(max, "4");
    free(world);
    free(max);
    free_entry(&e);
}

static void test_dispatch_inference(void **state)
{
    (void)state;
    sched_entry e;
    make_entry(&e, "j_inf", "inference", 0);
    const char *ids[] = {"w1"};
    assert_int_equal(dispatch_to(&R, &e, ids, 1), DISPATCH_OK);
    char *task = cmd_str("HGET %s j_inf", K_INFER_JOBS);
    assert_string_equal(task, e.raw);
    free(task);
    assert_int_equal(cmd_int("EXISTS %sj_inf:0", K_RDV_PREFIX), 0);
    free_entry(&e);
}

/* ---- the scheduler's lease (scheduler/main.c) ---- */

static void test_leader(void **state)
{
    (void)state;
    freeReplyObject(cmd("SET %s s_a PX 3000", K_LEADER));
    assert_int_equal(eval_i(eval(lua_leader_renew, "1", K_LEADER, "s_a", "60000", NULL)), 1);
    assert_true(cmd_int("PTTL %s", K_LEADER) > 3000);
    assert_int_equal(eval_i(eval(lua_leader_renew, "1", K_LEADER, "s_b", "60000", NULL)), 0); /* not ours */
    assert_int_equal(eval_i(eval(lua_leader_release, "1", K_LEADER, "s_b", NULL)), 0);
    assert_int_equal(cmd_int("EXISTS %s", K_LEADER), 1);
    assert_int_equal(eval_i(eval(lua_leader_release, "1", K_LEADER, "s_a", NULL)), 1);
    assert_int_equal(cmd_int("EXISTS %s", K_LEADER), 0);
    assert_int_equal(eval_i(eval(lua_leader_renew, "1", K_LEADER, "s_a", "60000", NULL)), 0); /* expired */
}

/* ---- the registry (server/bus.c, workers/main.c) ---- */

static void test_workers_list(void **state)
{
    (void)state;
    redisReply *rep = eval(lua_workers_list, "1", K_WORKERS_SET, K_WORKER_PREFIX, NULL);
    assert_int_equal(rep->type, REDIS_REPLY_ARRAY);
    assert_int_equal(rep->elements, 0);
    freeReplyObject(rep);
    freeReplyObject(cmd("SADD %s w1 w_dead", K_WORKERS_SET));
    freeReplyObject(cmd("HSET %sw1 info {} hb 5 running j_1", K_WORKER_PREFIX));
    rep = eval(lua_workers_list, "1", K_WORKERS_SET, K_WORKER_PREFIX, NULL);
    assert_int_equal(rep->elements, 2); /* w_dead has no hash */
    assert_string_equal(rep->element[0]->str, "w1");
    assert_int_equal(rep->element[1]->type, REDIS_REPLY_ARRAY);
    assert_int_equal(rep->element[1]->elements, 6);
    freeReplyObject(rep);
}

static void test_worker_beat(void **state)
{
    (void)state;
    char key[64];
    snprintf(key, sizeof(key), "%sw1", K_WORKER_PREFIX);
    /* a refresh with no hash: fenced, nothing written */
    assert_int_equal(eval_i(eval(lua_worker_beat, "2", key, K_WORKERS_SET, "{}", "100", "0", "", "5000", "0", "w1", NULL)), 0);
    assert_int_equal(cmd_int("EXISTS %s %s", key, K_WORKERS_SET), 0);
    /* registration */
    assert_int_equal(
        eval_i(eval(lua_worker_beat, "2", key, K_WORKERS_SET, "{\"kind\":\"cpu\"}", "100", "0", "", "5000", "1", "w1", NULL)), 1);
    assert_int_equal(cmd_int("SISMEMBER %s w1", K_WORKERS_SET), 1);
    assert_true(cmd_int("PTTL %s", key) > 0);
    /* a refresh */
    assert_int_equal(
        eval_i(eval(lua_worker_beat, "2", key, K_WORKERS_SET, "{\"kind\":\"cpu\"}", "200", "1", "j_1", "5000", "0", "w1", NULL)),
        1);
    char *running = cmd_str("HGET %s running", key), *hb = cmd_str("HGET %s hb", key);
    assert_string_equal(running, "j_1");
    assert_string_equal(hb, "200");
    free(running);
    free(hb);
}

static void test_worker_finish(void **state)
{
    (void)state;
    char inflight[64];
    snprintf(inflight, sizeof(inflight), "%sw1", K_INFLIGHT_PREFIX);
    freeReplyObject(cmd("RPUSH %s task-a task-b", inflight));
    event_msg ev;
    msg_event_init(&ev, "j_1", "worker:w1");
    snprintf(ev.state, sizeof(ev.state), "succeeded");
    char *evs = msg_event_encode(&ev);
    assert_int_equal(eval_i(eval(lua_worker_finish, "2", K_EVENTS_STREAM, inflight, "1000000", evs, "task-a", NULL)), 1);
    assert_int_equal(cmd_int("LLEN %s", inflight), 1);
    expect_event(0, "j_1", "succeeded", "");
    /* the task already gone: the event still goes */
    assert_int_equal(eval_i(eval(lua_worker_finish, "2", K_EVENTS_STREAM, inflight, "1000000", evs, "task-a", NULL)), 1);
    assert_int_equal(cmd_int("XLEN %s", K_EVENTS_STREAM), 2);
    free(evs);
}

/* ---- inference (server/infer.c, workers/exec_infer.c) ---- */

static void test_infer_enqueue(void **state)
{
    (void)state;
    char q[64], stats[64];
    snprintf(q, sizeof(q), "%sj_1", K_INFER_QUEUE_PREFIX);
    snprintf(stats, sizeof(stats), "%sj_1", K_INFER_STATS_PREFIX);
    assert_int_equal(eval_i(eval(lua_infer_enqueue, "2", q, stats, "2", "r1", NULL)), 1);
    assert_int_equal(eval_i(eval(lua_infer_enqueue, "2", q, stats, "2", "r2", NULL)), 1);
    assert_int_equal(eval_i(eval(lua_infer_enqueue, "2", q, stats, "2", "r3", NULL)), 0); /* full */
    assert_int_equal(cmd_int("LLEN %s", q), 2);
    char *arrivals = cmd_str("HGET %s arrivals", stats), *drops = cmd_str("HGET %s drops", stats);
    assert_string_equal(arrivals, "2");
    assert_string_equal(drops, "1");
    free(arrivals);
    free(drops);
}

static void test_infer_superseded(void **state)
{
    (void)state;
    char retry[64], drain[64];
    snprintf(retry, sizeof(retry), "%sj_1:0", K_RETRY_PREFIX);
    snprintf(drain, sizeof(drain), "%sj_1:w1", K_INFER_DRAIN_PREFIX);
    assert_int_equal(eval_i(eval(lua_infer_superseded, "2", retry, drain, NULL)), 0);
    freeReplyObject(cmd("SET %s 1", drain));
    assert_int_equal(eval_i(eval(lua_infer_superseded, "2", retry, drain, NULL)), 1);
    assert_int_equal(cmd_int("EXISTS %s", drain), 0); /* a drain is taken once */
    freeReplyObject(cmd("SET %s requeued", retry));
    assert_int_equal(eval_i(eval(lua_infer_superseded, "2", retry, drain, NULL)), 1);
}

/* ---- gangs and federated sites (workers/rendezvous.c, workers/fed_io.c) ---- */

/* rdv_join.lua with the ARGV its encoder writes */
static long long rdv_join_as(const char *key, int world, const char *addr, const char *worker)
{
    rdv_join_nums nums;
    const char *a[RDV_JOIN_ARGC];
    assert_int_equal(rdv_join_encode(&(rdv_join_msg){world, addr, worker, 60000}, &nums, a), 0);
    return eval_i(eval(lua_rdv_join, "1", key, a[0], a[1], a[2], a[3], NULL));
}

static void test_rdv_join(void **state)
{
    (void)state;
    char key[64];
    snprintf(key, sizeof(key), "%sj_1:0", K_RDV_PREFIX);
    assert_int_equal(rdv_join_as(key, 2, "10.0.0.1:7000", "w1"), 0);
    rdv_state st;
    rdv_read(key, &st);
    assert_int_equal(st.joined, 1);
    assert_true(st.have[0] && !st.have[1]);
    assert_int_equal(rdv_join_as(key, 2, "10.0.0.2:7000", "w2"), 1);
    assert_int_equal(rdv_join_as(key, 2, "10.0.0.3:7000", "w3"), -1); /* full */
    rdv_read(key, &st);
    assert_int_equal(st.joined, 2);
    assert_int_equal(st.naddrs, 2);
    assert_string_equal(st.addrs[0], "10.0.0.1:7000");
    assert_string_equal(st.addrs[1], "10.0.0.2:7000");
    assert_false(st.aborted);
    char *addr = cmd_str("HGET %s addr:1", key), *worker = cmd_str("HGET %s worker:1", key);
    assert_string_equal(addr, "10.0.0.2:7000");
    assert_string_equal(worker, "w2");
    free(addr);
    free(worker);
    assert_int_equal(cmd_int("HEXISTS %s addr:2", key), 0);
    assert_true(cmd_int("PTTL %s", key) > 0);
}

static void test_fed_claim(void **state)
{
    (void)state;
    char key[64];
    snprintf(key, sizeof(key), "%sj_1:0:sites", K_FED_PREFIX);
    assert_int_equal(eval_i(eval(lua_fed_claim, "1", key, "86400", "w1", "0", "1", NULL)), 0);
    assert_int_equal(eval_i(eval(lua_fed_claim, "1", key, "86400", "w1", "0", "1", NULL)), 0); /* holds it already */
    assert_int_equal(eval_i(eval(lua_fed_claim, "1", key, "86400", "w2", "0", "1", NULL)), 1);
    assert_int_equal(eval_i(eval(lua_fed_claim, "1", key, "86400", "w3", "0", "1", NULL)), -1); /* every site taken */
    assert_true(cmd_int("TTL %s", key) > 0);
    char *site1 = cmd_str("HGET %s 1", key);
    assert_string_equal(site1, "w2");
    free(site1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_all_load, setup),
        cmocka_unit_test_setup(test_requeue_task, setup),
        cmocka_unit_test_setup(test_requeue_task_once, setup),
        cmocka_unit_test_setup(test_requeue_task_past_max_attempts, setup),
        cmocka_unit_test_setup(test_requeue_forgive, setup),
        cmocka_unit_test_setup(test_requeue_tolerated_site, setup),
        cmocka_unit_test_setup(test_requeue_tolerated_site_zero, setup),
        cmocka_unit_test_setup(test_requeue_task_preempted, setup),
        cmocka_unit_test_setup(test_requeue_inference_replica, setup),
        cmocka_unit_test_setup(test_requeue_not_a_task, setup),
        cmocka_unit_test_setup(test_requeue_worker_tasks, setup),
        cmocka_unit_test_setup(test_requeue_worker_stale, setup),
        cmocka_unit_test_setup(test_dispatch_one, setup),
        cmocka_unit_test_setup(test_dispatch_cancelled, setup),
        cmocka_unit_test_setup(test_dispatch_gang, setup),
        cmocka_unit_test_setup(test_dispatch_elastic, setup),
        cmocka_unit_test_setup(test_dispatch_inference, setup),
        cmocka_unit_test_setup(test_leader, setup),
        cmocka_unit_test_setup(test_workers_list, setup),
        cmocka_unit_test_setup(test_worker_beat, setup),
        cmocka_unit_test_setup(test_worker_finish, setup),
        cmocka_unit_test_setup(test_infer_enqueue, setup),
        cmocka_unit_test_setup(test_infer_superseded, setup),
        cmocka_unit_test_setup(test_rdv_join, setup),
        cmocka_unit_test_setup(test_fed_claim, setup),
    };
    return cmocka_run_group_tests(tests, start_redis, stop_redis);
}
