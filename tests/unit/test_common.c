/* test_common.c - unit tests for common/: config, clock, ids, jobstate, msg, redis_auth (secret files, AUTH). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/config.h"
#include "common/ids.h"
#include "common/jobstate.h"
#include "common/jobtypes.h"
#include "wire/keys.h"
#include "wire/msg.h"
#include "common/paths.h"
#include "wire/redis_auth.h"

#include <sys/stat.h>

/* ---- config ---- */

#define N_OPTS 3

static void opts_defaults(config_opt *o)
{
    o[0] = (config_opt)CONFIG_OPT("listen", "address to listen on", "127.0.0.1:8080");
    o[1] = (config_opt)CONFIG_OPT("db", "database path", "gantry.db");
    o[2] = (config_opt)CONFIG_OPT("redis", "redis url", "redis://127.0.0.1:6379");
}

static int parse(config_opt *o, int argc, char **argv)
{
    return config_parse(argc, argv, o, N_OPTS, "test", "a test program");
}

static void test_config_defaults(void **state)
{
    (void)state;
    config_opt o[N_OPTS];
    opts_defaults(o);
    char *argv[] = {"test", NULL};
    assert_int_equal(parse(o, 1, argv), 0);
    assert_string_equal(config_get(o, N_OPTS, "listen"), "127.0.0.1:8080");
    assert_string_equal(config_get(o, N_OPTS, "db"), "gantry.db");
    assert_string_equal(config_get(o, N_OPTS, "redis"), "redis://127.0.0.1:6379");
    assert_null(config_get(o, N_OPTS, "nosuch"));
}

static void test_config_flag_separate_value(void **state)
{
    (void)state;
    config_opt o[N_OPTS];
    opts_defaults(o);
    char *argv[] = {"test", "--db", "/tmp/x.db", "--listen", "0.0.0.0:9000", NULL};
    assert_int_equal(parse(o, 5, argv), 0);
    assert_string_equal(config_get(o, N_OPTS, "db"), "/tmp/x.db");
    assert_string_equal(config_get(o, N_OPTS, "listen"), "0.0.0.0:9000");
    assert_string_equal(config_get(o, N_OPTS, "redis"), "redis://127.0.0.1:6379");
}

static void test_config_flag_equals_value(void **state)
{
    (void)state;
    config_opt o[N_OPTS];
    opts_defaults(o);
    char *argv[] = {"test", "--db=/tmp/y.db", "--redis=redis://h:1", NULL};
    assert_int_equal(parse(o, 3, argv), 0);
    assert_string_equal(config_get(o, N_OPTS, "db"), "/tmp/y.db");
    assert_string_equal(config_get(o, N_OPTS, "redis"), "redis://h:1");
    assert_string_equal(config_get(o, N_OPTS, "listen"), "127.0.0.1:8080");
}

/* writes text to a fresh file in a temp dir; path receives its name */
static void write_temp(char *dir, size_t dirlen, char *path, size_t pathlen, const char *text)
{
    snprintf(dir, dirlen, "/tmp/gantry-test-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, pathlen, "%s/test.conf", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void remove_temp(const char *dir, const char *path)
{
    unlink(path);
    rmdir(dir);
}

static const char conf_text[] = "# gantry test config\n"
                                "\n"
                                "   # an indented comment\n"
                                "db = /var/lib/gantry.db\n"
                                "listen=  10.0.0.1:80   \n";

static void test_config_file(void **state)
{
    (void)state;
    char dir[64], path[128];
    write_temp(dir, sizeof(dir), path, sizeof(path), conf_text);
    config_opt o[N_OPTS];
    opts_defaults(o);
    char *argv[] = {"test", "--config", path, NULL};
    assert_int_equal(parse(o, 3, argv), 0);
    assert_string_equal(config_get(o, N_OPTS, "db"), "/var/lib/gantry.db");
    assert_string_equal(config_get(o, N_OPTS, "listen"), "10.0.0.1:80");
    assert_string_equal(config_get(o, N_OPTS, "redis"), "redis://127.0.0.1:6379");
    /* values read from the file are copies, released by config_free */
    assert_ptr_equal(o[0].owned, o[0].value);
    remove_temp(dir, path);
    config_free(o, N_OPTS);
}

static void test_config_flag_overrides_file(void **state)
{
    (void)state;
    char dir[64], path[128], cfg[160];
    write_temp(dir, sizeof(dir), path, sizeof(path), conf_text);
    snprintf(cfg, sizeof(cfg), "--config=%s", path);
    config_opt o[N_OPTS];
    opts_defaults(o);
    /* the flag comes before --config on the command line and still wins */
    char *argv[] = {"test", "--db", "/flag.db", cfg, NULL};
    /* regression: the file's copy of "db" leaked when the flag replaced it (LeakSanitizer checks) */
    assert_int_equal(parse(o, 4, argv), 0);
    assert_string_equal(config_get(o, N_OPTS, "db"), "/flag.db");
    assert_string_equal(config_get(o, N_OPTS, "listen"), "10.0.0.1:80");
    assert_null(o[1].owned); /* "db" now points into argv */
    remove_temp(dir, path);
    config_free(o, N_OPTS);
}

static void test_config_errors(void **state)
{
    (void)state;
    config_opt o[N_OPTS];
    opts_defaults(o);
    char *unknown[] = {"test", "--nosuch", "1", NULL};
    assert_int_equal(parse(o, 3, unknown), -1);

    opts_defaults(o);
    char *missing_value[] = {"test", "--db", NULL};
    assert_int_equal(parse(o, 2, missing_value), -1);

    opts_defaults(o);
    char *positional[] = {"test", "stray", NULL};
    assert_int_equal(parse(o, 2, positional), -1);

    opts_defaults(o);
    char *nofile[] = {"test", "--config", "/nonexistent/gantry/none.conf", NULL};
    assert_int_equal(parse(o, 3, nofile), -1);

    char dir[64], path[128];
    write_temp(dir, sizeof(dir), path, sizeof(path), "# ok\nbogus = 1\n");
    opts_defaults(o);
    char *badfile[] = {"test", "--config", path, NULL};
    assert_int_equal(parse(o, 3, badfile), -1);
    remove_temp(dir, path);

    write_temp(dir, sizeof(dir), path, sizeof(path), "db /no/equals\n");
    opts_defaults(o);
    assert_int_equal(parse(o, 3, badfile), -1);
    remove_temp(dir, path);
    config_free(o, N_OPTS);
}

static void test_config_help(void **state)
{
    (void)state;
    config_opt o[N_OPTS];
    opts_defaults(o);
    char *argv[] = {"test", "--db", "x", "--help", NULL};
    assert_int_equal(parse(o, 4, argv), 1);
    char *shortv[] = {"test", "-h", NULL};
    opts_defaults(o);
    assert_int_equal(parse(o, 2, shortv), 1);
}

/* Regression: "--config" as the last argument (no file name) was silently ignored. */
static void test_config_config_without_value(void **state)
{
    (void)state;
    config_opt o[N_OPTS];
    opts_defaults(o);
    char *argv[] = {"test", "--config", NULL};
    assert_int_equal(parse(o, 2, argv), -1);
}

/* ---- clock ---- */

static void test_clock_iso8601(void **state)
{
    (void)state;
    char buf[32];
    clock_iso8601(INT64_C(1795331520123), buf, sizeof(buf));
    assert_string_equal(buf, "2026-11-22T07:12:00.123Z");
    clock_iso8601(0, buf, sizeof(buf));
    assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
    clock_iso8601(INT64_C(951782400007), buf, sizeof(buf)); /* leap day */
    assert_string_equal(buf, "2000-02-29T00:00:00.007Z");
    assert_int_equal(strlen(buf), 24);
}

static void test_clock_now(void **state)
{
    (void)state;
    int64_t now = clock_now_ms();
    assert_true(now > INT64_C(1600000000000)); /* after 2020 */
    int64_t a = clock_mono_us(), b = clock_mono_us();
    assert_true(b >= a);
}

/* Regression: negative times were formatted with truncating division ("00:00:00.-01Z"). */
static void test_clock_iso8601_negative(void **state)
{
    (void)state;
    char buf[32];
    clock_iso8601(-1, buf, sizeof(buf));
    assert_string_equal(buf, "1969-12-31T23:59:59.999Z");
    clock_iso8601(-1500, buf, sizeof(buf));
    assert_string_equal(buf, "1969-12-31T23:59:58.500Z");
}

static void test_clock_parse_iso8601(void **state)
{
    (void)state;
    char buf[32];
    int64_t ms = 0;
    const int64_t times[] = {INT64_C(1795331520123), 0, INT64_C(951782400007), -1500};
    for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) { /* what clock_iso8601 writes reads back */
        clock_iso8601(times[i], buf, sizeof(buf));
        assert_int_equal(clock_parse_iso8601(buf, &ms), 0);
        assert_int_equal(ms, times[i]);
    }
    assert_int_equal(clock_parse_iso8601("2026-11-22T07:12:00Z", &ms), 0);
    assert_int_equal(ms, INT64_C(1795331520000));
    assert_int_equal(clock_parse_iso8601("2026-11-22T07:12:00.5Z", &ms), 0);
    assert_int_equal(ms, INT64_C(1795331520500));
    const char *bad[] = {"",
                         "2026-11-22",
                         "2026-11-22T07:12:00",
                         "2026-11-22T07:12:00.Z",
                         "2026-13-22T07:12:00Z",
                         "2026-11-22T07:12:00Zjunk",
                         "yesterday",
                         NULL};
    for (const char **b = bad; *b; b++)
        assert_int_equal(clock_parse_iso8601(*b, &ms), -1);
    assert_int_equal(clock_parse_iso8601(NULL, &ms), -1);
}

static void test_clock_duration(void **state)
{
    (void)state;
    const struct {
        double ms;
        const char *text;
    } cases[] = {{0, "0.0ms"},         {0.42, "0.4ms"},     {9.9, "9.9ms"},       {9.96, "10ms"},     {850, "850ms"},
                 {999.4, "999ms"},     {999.6, "1.0s"},     {12345, "12.3s"},     {59949, "59.9s"},   {59951, "1m00s"},
                 {108000, "1m48s"},    {119079.1, "1m59s"}, {3599400, "59m59s"},  {3599600, "1h00m"}, {7380000, "2h03m"},
                 {86369000, "23h59m"}, {86371000, "1d00h"}, {273600000, "3d04h"}, {-5, "0.0ms"},      {NAN, "0.0ms"}};
    char buf[24];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        clock_duration(cases[i].ms, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].text);
    }
    clock_duration(1e300, buf, sizeof(buf)); /* no overflow, still a duration */
    assert_non_null(strstr(buf, "d"));
}

/* ---- ids ---- */

static void check_id(const char *id, const char *prefix, size_t nbytes)
{
    size_t plen = strlen(prefix);
    assert_int_equal(strlen(id), plen + 1 + 2 * nbytes);
    assert_memory_equal(id, prefix, plen);
    assert_int_equal(id[plen], '_');
    for (size_t i = plen + 1; id[i]; i++)
        assert_true(isdigit((unsigned char)id[i]) || (id[i] >= 'a' && id[i] <= 'f'));
}

static void test_id_random(void **state)
{
    (void)state;
    char a[80], b[80];
    assert_int_equal(id_random("j", 8, a, sizeof(a)), 0);
    check_id(a, "j", 8);
    assert_int_equal(id_random("j", 8, b, sizeof(b)), 0);
    check_id(b, "j", 8);
    assert_string_not_equal(a, b);

    assert_int_equal(id_random("gty", 32, a, sizeof(a)), 0);
    check_id(a, "gty", 32);
}

static void test_id_random_unique(void **state)
{
    (void)state;
    enum { N = 500 };
    static char ids[N][32];
    for (int i = 0; i < N; i++) {
        assert_int_equal(id_random("e", 12, ids[i], sizeof(ids[i])), 0);
        for (int k = 0; k < i; k++)
            assert_string_not_equal(ids[i], ids[k]);
    }
}

/* ids in time order: the ms clock in 12 hex digits, then random; a later id sorts after */
static void test_id_sortable(void **state)
{
    (void)state;
    char a[80], b[80];
    int64_t before = clock_now_ms();
    assert_int_equal(id_sortable("j", 10, a, sizeof(a)), 0);
    check_id(a, "j", 16);
    char ms[13];
    memcpy(ms, a + 2, 12);
    ms[12] = '\0';
    int64_t t = (int64_t)strtoll(ms, NULL, 16);
    assert_true(t >= before && t <= clock_now_ms());
    for (int i = 0; i < 200; i++) { /* never out of order, never equal, also within one ms */
        assert_int_equal(id_sortable("j", 10, b, sizeof(b)), 0);
        assert_true(strcmp(b, a) != 0);
        assert_true(strncmp(b, a, 14) >= 0);
        memcpy(a, b, sizeof(a));
    }
    assert_int_equal(id_sortable("e", 10, a, 34), -1); /* "e_" + 12 + 20 + NUL = 35 bytes */
    assert_int_equal(id_sortable("e", 10, a, 35), 0);
    assert_int_equal(id_sortable("e", 65, a, sizeof(a)), -1);
}

/* job ids: as long as id_random's, in time order, each greater than the last, also many in one ms */
static void test_id_sequential(void **state)
{
    (void)state;
    char a[80], b[80];
    int64_t before = clock_now_ms();
    assert_int_equal(id_sequential("j", a, sizeof(a)), 0);
    check_id(a, "j", 10);
    char ms[13];
    memcpy(ms, a + 2, 12);
    ms[12] = '\0';
    int64_t t = (int64_t)strtoll(ms, NULL, 16);
    assert_true(t >= before && t <= clock_now_ms());
    for (int i = 0; i < 100000; i++) {
        assert_int_equal(id_sequential("j", b, sizeof(b)), 0);
        if (strcmp(b, a) <= 0) fail_msg("%s after %s", b, a);
        memcpy(a, b, sizeof(a));
    }
    memcpy(ms, a + 2, 12);
    assert_true((int64_t)strtoll(ms, NULL, 16) <= clock_now_ms() + 2); /* the clock part does not run ahead */
    assert_int_equal(id_sequential("j", a, 22), -1);                   /* "j_" + 20 + NUL = 23 bytes */
    assert_int_equal(id_sequential("j", a, 23), 0);
}

static void test_id_random_too_small(void **state)
{
    (void)state;
    char small[10];
    /* "j_" + 16 hex + NUL = 19 bytes */
    assert_int_equal(id_random("j", 8, small, sizeof(small)), -1);
    char exact[19];
    assert_int_equal(id_random("j", 8, exact, sizeof(exact)), 0);
    check_id(exact, "j", 8);
    char big[200];
    assert_int_equal(id_random("j", 65, big, sizeof(big)), -1); /* more than the 64-byte buffer */
}

/* ---- jobstate ---- */

static void test_jobstate_names(void **state)
{
    (void)state;
    for (int s = 0; s < JS__COUNT; s++)
        assert_int_equal(job_state_parse(job_state_name((job_state)s)), s);
    assert_string_equal(job_state_name(JS_RUNNING), "running");
    assert_string_equal(job_state_name(JS_INVALID), "invalid");
    assert_int_equal(job_state_parse("bogus"), JS_INVALID);
    assert_int_equal(job_state_parse(NULL), JS_INVALID);
    assert_true(job_state_terminal(JS_SUCCEEDED));
    assert_true(job_state_terminal(JS_FAILED));
    assert_true(job_state_terminal(JS_CANCELLED));
    assert_false(job_state_terminal(JS_RUNNING));
    assert_false(job_state_terminal(JS_QUEUED));
}

static void test_jobstate_transitions(void **state)
{
    (void)state;
    assert_true(job_state_can_move(JS_QUEUED, JS_SCHEDULED));
    assert_true(job_state_can_move(JS_SCHEDULED, JS_RUNNING));
    assert_true(job_state_can_move(JS_RUNNING, JS_QUEUED)); /* requeue */
    assert_true(job_state_can_move(JS_SCHEDULED, JS_QUEUED));
    assert_true(job_state_can_move(JS_RUNNING, JS_SUCCEEDED));
    assert_true(job_state_can_move(JS_RUNNING, JS_FAILED));
    assert_true(job_state_can_move(JS_QUEUED, JS_CANCELLED));
    assert_true(job_state_can_move(JS_QUEUED, JS_RUNNING)); /* running may overtake scheduled */
    assert_true(job_state_can_move(JS_RUNNING, JS_RESIZING));
    assert_true(job_state_can_move(JS_RESIZING, JS_RUNNING));

    assert_false(job_state_can_move(JS_QUEUED, JS_RESIZING));
    assert_false(job_state_can_move(JS_QUEUED, JS_QUEUED)); /* a second "queued" is not a move */
    assert_false(job_state_can_move(JS_SCHEDULED, JS_RESIZING));
    assert_false(job_state_can_move(JS_RUNNING, JS_SCHEDULED));
    for (int to = 0; to < JS__COUNT; to++) {
        assert_false(job_state_can_move(JS_SUCCEEDED, (job_state)to));
        assert_false(job_state_can_move(JS_FAILED, (job_state)to));
        assert_false(job_state_can_move(JS_CANCELLED, (job_state)to));
    }
    assert_false(job_state_can_move(JS_INVALID, JS_RUNNING));
    assert_false(job_state_can_move(JS_RUNNING, JS_INVALID));
}

static void test_job_type_valid(void **state)
{
    (void)state;
    assert_true(job_type_valid("placement"));
    assert_true(job_type_valid("training"));
    assert_true(job_type_valid("inference"));
    assert_true(job_type_valid("federated"));
    assert_false(job_type_valid("Placement"));
    assert_false(job_type_valid(""));
    assert_false(job_type_valid("mining"));
    assert_false(job_type_valid(NULL));
}

/* the table's traits (common/jobtypes.h): what the scheduler and the workers branch on */
static void test_job_type_traits(void **state)
{
    (void)state;
    assert_int_equal(job_type_traits("placement"), JT_BACKFILL);
    assert_int_equal(job_type_traits("training"), JT_GANG | JT_REGISTERS_MODEL);
    assert_int_equal(job_type_traits("inference"), JT_SERVING);
    assert_int_equal(job_type_traits("federated"), JT_GANG | JT_PER_SITE | JT_REGISTERS_MODEL);
    assert_int_equal(job_type_traits("mining"), 0);
    assert_int_equal(job_type_traits(NULL), 0);
    assert_string_equal(job_type_list(), "placement, training, inference, federated");
}

static void test_job_priority(void **state)
{
    (void)state;
    assert_int_equal(job_priority_parse("low"), 0);
    assert_int_equal(job_priority_parse("normal"), 1);
    assert_int_equal(job_priority_parse("high"), 2);
    assert_int_equal(job_priority_parse("urgent"), -1);
    assert_int_equal(job_priority_parse("HIGH"), -1);
    assert_int_equal(job_priority_parse(NULL), -1);
    assert_string_equal(job_priority_name(0), "low");
    assert_string_equal(job_priority_name(1), "normal");
    assert_string_equal(job_priority_name(2), "high");
    assert_string_equal(job_priority_name(42), "normal");
}

/* ---- msg: tasks ---- */

static void test_msg_task_roundtrip(void **state)
{
    (void)state;
    task_msg t;
    memset(&t, 0, sizeof(t));
    snprintf(t.job_id, sizeof(t.job_id), "j_0123456789abcdef");
    snprintf(t.tenant, sizeof(t.tenant), "t_system");
    snprintf(t.type, sizeof(t.type), "placement");
    t.priority = 2;
    t.slots = 4;
    t.attempt = 3;
    t.spec = json_pack("{s:{s:[{s:s, s:f}]}, s:[s], s:b}", "graph", "ops", "name", "a", "compute_us", 1.5, "algorithms", "m-topo",
                       "fuse", 1);
    assert_non_null(t.spec);

    char *s = msg_task_encode(&t);
    assert_non_null(s);
    task_msg d;
    assert_int_equal(msg_task_decode(s, &d), 0);
    assert_string_equal(d.job_id, t.job_id);
    assert_string_equal(d.tenant, t.tenant);
    assert_string_equal(d.type, t.type);
    assert_int_equal(d.priority, 2);
    assert_int_equal(d.slots, 4);
    assert_int_equal(d.attempt, 3);
    assert_non_null(d.spec);
    assert_true(json_equal(d.spec, t.spec));
    free(s);
    msg_task_clear(&d);
    assert_null(d.spec);
    assert_int_equal(d.job_id[0], '\0');
    msg_task_clear(&t);
}

/* the tenant's limits travel with the task; a task without them (an older server) has none */
static void test_msg_task_limits(void **state)
{
    (void)state;
    task_msg t;
    memset(&t, 0, sizeof(t));
    snprintf(t.job_id, sizeof(t.job_id), "j_1");
    snprintf(t.tenant, sizeof(t.tenant), "t_1");
    snprintf(t.type, sizeof(t.type), "training");
    t.slots = 1;
    t.attempt = 2;
    t.max_runtime_s = 3600;
    t.max_memory_bytes = 8589934592LL;
    t.spec = json_pack("{s:i}", "steps", 10);
    char *s = msg_task_encode(&t);
    assert_non_null(s);
    /* "attempt" before "spec" (requeue.c edits it as text), the limits before the spec too */
    assert_true(strstr(s, "\"attempt\":2") < strstr(s, "\"spec\""));
    assert_non_null(strstr(s, "\"limits\":{\"runtime_s\":3600,\"memory_bytes\":8589934592}"));
    task_msg d;
    assert_int_equal(msg_task_decode(s, &d), 0);
    assert_true(d.max_runtime_s == 3600 && d.max_memory_bytes == 8589934592LL);
    free(s);
    msg_task_clear(&d);
    t.max_runtime_s = 0; /* only the limits that are set */
    s = msg_task_encode(&t);
    assert_null(strstr(s, "runtime_s"));
    assert_int_equal(msg_task_decode(s, &d), 0);
    assert_true(d.max_runtime_s == 0 && d.max_memory_bytes == 8589934592LL);
    free(s);
    msg_task_clear(&d);
    t.max_memory_bytes = 0;
    s = msg_task_encode(&t);
    assert_null(strstr(s, "limits"));
    free(s);
    msg_task_clear(&t);
    const char *odd = "{\"job_id\":\"j_1\",\"tenant\":\"t\",\"type\":\"placement\",\"priority\":1,\"slots\":1,"
                      "\"attempt\":0,\"limits\":{\"runtime_s\":-5,\"memory_bytes\":\"x\"},\"spec\":{}}";
    assert_int_equal(msg_task_decode(odd, &d), 0); /* nonsense limits: none */
    assert_true(d.max_runtime_s == 0 && d.max_memory_bytes == 0);
    msg_task_clear(&d);
}

/* the tenant's roots travel with the task (a program job's worker confines its workdir under them);
 * a task without them (an older server, a tenant without roots) has none: an empty array */
static void test_msg_task_roots(void **state)
{
    (void)state;
    task_msg t;
    memset(&t, 0, sizeof(t));
    snprintf(t.job_id, sizeof(t.job_id), "j_1");
    snprintf(t.tenant, sizeof(t.tenant), "t_1");
    snprintf(t.type, sizeof(t.type), "training");
    t.slots = 2;
    t.roots = json_pack("[ss]", "/srv/data/acme", "/srv/shared");
    t.spec = json_pack("{s:{s:[s], s:s}}", "program", "command", "python3", "workdir", "pytorch");
    char *s = msg_task_encode(&t);
    assert_non_null(s);
    assert_true(strstr(s, "\"roots\":[\"/srv/data/acme\",\"/srv/shared\"]") < strstr(s, "\"spec\""));
    task_msg d;
    assert_int_equal(msg_task_decode(s, &d), 0);
    assert_true(json_equal(d.roots, t.roots));
    free(s);
    s = msg_task_encode(&d); /* requeue.c's round trip keeps them */
    msg_task_clear(&d);
    assert_int_equal(msg_task_decode(s, &d), 0);
    assert_true(json_equal(d.roots, t.roots));
    free(s);
    msg_task_clear(&d);
    assert_null(d.roots);
    json_decref(t.roots);
    t.roots = json_array(); /* none: not written */
    s = msg_task_encode(&t);
    assert_null(strstr(s, "roots"));
    assert_int_equal(msg_task_decode(s, &d), 0);
    assert_true(json_is_array(d.roots) && json_array_size(d.roots) == 0);
    free(s);
    msg_task_clear(&d);
    json_decref(t.roots);
    t.roots = NULL;
    s = msg_task_encode(&t);
    assert_null(strstr(s, "roots"));
    free(s);
    msg_task_clear(&t);
}

static void test_msg_task_decode_rejects(void **state)
{
    (void)state;
    task_msg t;
    const char *bad[] = {
        "not json",
        "",
        "[1,2,3]",
        /* no spec */
        "{\"job_id\":\"j_1\",\"tenant\":\"t\",\"type\":\"placement\",\"priority\":1,\"slots\":1,\"attempt\":0}",
        /* no job_id */
        "{\"tenant\":\"t\",\"type\":\"placement\",\"priority\":1,\"slots\":1,\"attempt\":0,\"spec\":{}}",
        /* no attempt */
        "{\"job_id\":\"j_1\",\"tenant\":\"t\",\"type\":\"placement\",\"priority\":1,\"slots\":1,\"spec\":{}}",
        /* priority of the wrong type */
        "{\"job_id\":\"j_1\",\"tenant\":\"t\",\"type\":\"placement\",\"priority\":\"high\",\"slots\":1,\"attempt\":0,"
        "\"spec\":{}}",
        /* roots not an array of strings */
        "{\"job_id\":\"j_1\",\"tenant\":\"t\",\"type\":\"training\",\"priority\":1,\"slots\":1,\"attempt\":0,"
        "\"roots\":\"/srv\",\"spec\":{}}",
        "{\"job_id\":\"j_1\",\"tenant\":\"t\",\"type\":\"training\",\"priority\":1,\"slots\":1,\"attempt\":0,"
        "\"roots\":[\"/srv\",1],\"spec\":{}}",
        /* type too long for type[16] */
        "{\"job_id\":\"j_1\",\"tenant\":\"t\",\"type\":\"0123456789abcdef\",\"priority\":1,\"slots\":1,\"attempt\":0,"
        "\"spec\":{}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&t, 0x5a, sizeof(t));
        assert_int_equal(msg_task_decode(bad[i], &t), -1);
        assert_null(t.spec); /* left cleared */
        assert_null(t.roots);
        assert_int_equal(t.job_id[0], '\0');
        assert_int_equal(t.priority, 0);
    }
}

static void test_msg_task_decode_id_lengths(void **state)
{
    (void)state;
    char id_ok[MSG_ID_LEN], id_long[MSG_ID_LEN + 1], buf[512];
    memset(id_ok, 'a', sizeof(id_ok) - 1);
    id_ok[sizeof(id_ok) - 1] = '\0'; /* 47 chars: fits */
    memset(id_long, 'a', sizeof(id_long) - 1);
    id_long[sizeof(id_long) - 1] = '\0'; /* 48 chars: too long */
    const char *fmt = "{\"job_id\":\"%s\",\"tenant\":\"%s\",\"type\":\"placement\",\"priority\":1,\"slots\":1,\"attempt\":0,"
                      "\"spec\":{}}";
    task_msg t;

    snprintf(buf, sizeof(buf), fmt, id_ok, id_ok);
    assert_int_equal(msg_task_decode(buf, &t), 0);
    assert_string_equal(t.job_id, id_ok);
    assert_string_equal(t.tenant, id_ok);
    msg_task_clear(&t);

    snprintf(buf, sizeof(buf), fmt, id_long, "t");
    assert_int_equal(msg_task_decode(buf, &t), -1);
    snprintf(buf, sizeof(buf), fmt, "j_1", id_long);
    assert_int_equal(msg_task_decode(buf, &t), -1);
}

/* ---- msg: events ---- */

static void test_msg_event_init(void **state)
{
    (void)state;
    event_msg a, b;
    int64_t before = clock_now_ms();
    msg_event_init(&a, "j_1", "scheduler");
    msg_event_init(&b, "j_1", "scheduler");
    assert_true(strncmp(a.id, "e_", 2) == 0);
    assert_string_not_equal(a.id, b.id);
    assert_string_equal(a.job_id, "j_1");
    assert_string_equal(a.source, "scheduler");
    assert_true(a.ts >= before && a.ts <= clock_now_ms());
    assert_true(a.progress == -1);
    assert_null(a.result);
    assert_string_equal(a.state, "");
    msg_event_clear(&a);
    msg_event_clear(&b);
}

static void test_msg_event_roundtrip_result(void **state)
{
    (void)state;
    event_msg e, d;
    msg_event_init(&e, "j_abc", "worker:w_1");
    e.ts = INT64_C(1795331520123);
    snprintf(e.state, sizeof(e.state), "succeeded");
    snprintf(e.reason, sizeof(e.reason), "done in \"3\" steps");
    snprintf(e.worker, sizeof(e.worker), "w_1");
    e.progress = 1.0;
    e.result = json_pack("{s:s, s:[i,i], s:{s:f}}", "best", "m-topo", "devices", 0, 1, "sim", "makespan_us", 12.5);

    char *s = msg_event_encode(&e);
    assert_non_null(s);
    assert_int_equal(msg_event_decode(s, &d), 0);
    assert_string_equal(d.id, e.id);
    assert_string_equal(d.job_id, "j_abc");
    assert_true(d.ts == e.ts);
    assert_string_equal(d.source, "worker:w_1");
    assert_string_equal(d.state, "succeeded");
    assert_string_equal(d.reason, e.reason);
    assert_string_equal(d.worker, "w_1");
    assert_true(d.progress == 1.0);
    assert_non_null(d.result);
    assert_true(json_equal(d.result, e.result));
    free(s);
    msg_event_clear(&d);
    msg_event_clear(&e);
    assert_null(e.result);
}

static void test_msg_event_roundtrip_progress_absent(void **state)
{
    (void)state;
    event_msg e, d;
    msg_event_init(&e, "j_abc", "scheduler");
    snprintf(e.state, sizeof(e.state), "scheduled");
    char *s = msg_event_encode(&e);
    assert_non_null(s);
    assert_int_equal(msg_event_decode(s, &d), 0);
    assert_true(d.progress == -1);
    assert_null(d.result); /* "result":null decodes to NULL */
    assert_string_equal(d.state, "scheduled");
    assert_true(d.ts == e.ts);
    free(s);
    msg_event_clear(&d);

    /* a progress-only event */
    e.state[0] = '\0';
    e.progress = 0.25;
    s = msg_event_encode(&e);
    assert_non_null(s);
    assert_int_equal(msg_event_decode(s, &d), 0);
    assert_string_equal(d.state, "");
    assert_true(d.progress == 0.25);
    free(s);
    msg_event_clear(&d);
    msg_event_clear(&e);
}

static void test_msg_event_decode_minimal_and_rejects(void **state)
{
    (void)state;
    event_msg d;
    /* only id, job_id and ts are required; the rest default */
    assert_int_equal(msg_event_decode("{\"id\":\"e_1\",\"job_id\":\"j_1\",\"ts\":5}", &d), 0);
    assert_string_equal(d.id, "e_1");
    assert_true(d.ts == 5);
    assert_true(d.progress == -1);
    assert_string_equal(d.state, "");
    assert_string_equal(d.source, "");
    assert_null(d.result);
    msg_event_clear(&d);

    const char *bad[] = {
        "{",
        "null",
        "{\"job_id\":\"j_1\",\"ts\":5}",
        "{\"id\":\"e_1\",\"ts\":5}",
        "{\"id\":\"e_1\",\"job_id\":\"j_1\"}",
        "{\"id\":\"e_1\",\"job_id\":\"j_1\",\"ts\":\"5\"}",
        "{\"id\":\"e_1\",\"job_id\":\"j_1\",\"ts\":5,\"state\":3}",
        "{\"id\":\"e_1\",\"job_id\":\"j_1\",\"ts\":5,\"progress\":\"half\"}",
        "{\"id\":\"e_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"job_id\":\"j_1\",\"ts\":5}",
        "{\"id\":\"e_1\",\"job_id\":\"j_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"ts\":5}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&d, 0x5a, sizeof(d));
        assert_int_equal(msg_event_decode(bad[i], &d), -1);
        assert_null(d.result);
        assert_int_equal(d.id[0], '\0');
    }
}

static void test_keys(void **state)
{
    (void)state;
    assert_string_equal(K_JOBS_STREAM, "gantry:jobs");
    assert_string_equal(K_EVENTS_STREAM, "gantry:events");
    assert_true(K_WORKER_TTL_MS > K_HEARTBEAT_MS);
}

/* ---- redis_auth: secret files and the AUTH command ---- */

static void write_secret(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static void test_secret_file_read(void **state)
{
    (void)state;
    char dir[] = "/tmp/gantry-secret-XXXXXX", path[64], out[64], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/pw", dir);
    write_secret(path, "s3cret \n\n", 0600);
    assert_int_equal(secret_file_read(path, out, sizeof(out), err, sizeof(err)), 6); /* trailing white space dropped */
    assert_string_equal(out, "s3cret");
    assert_int_equal(chmod(path, 0400), 0);
    assert_int_equal(secret_file_read(path, out, sizeof(out), err, sizeof(err)), 6);
    /* others or a foreign group may not read it */
    assert_int_equal(chmod(path, 0604), 0);
    assert_int_equal(secret_file_read(path, out, sizeof(out), err, sizeof(err)), -1);
    assert_non_null(strstr(err, "chmod 600"));
    assert_int_equal(chmod(path, 0620), 0);
    assert_int_equal(secret_file_read(path, out, sizeof(out), err, sizeof(err)), -1);
    /* 440 for the process's own group (a Kubernetes secret volume with fsGroup) */
    assert_int_equal(chmod(path, 0440), 0);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(secret_file_read(path, out, sizeof(out), err, sizeof(err)), sb.st_gid == getegid() ? 6 : -1);
    /* empty, too long, missing, a directory */
    write_secret(path, "\n", 0600);
    assert_int_equal(secret_file_read(path, out, sizeof(out), err, sizeof(err)), -1);
    write_secret(path, "0123456789", 0600);
    assert_int_equal(secret_file_read(path, out, 8, err, sizeof(err)), -1);
    assert_int_equal(secret_file_read("/nonexistent/pw", out, sizeof(out), err, sizeof(err)), -1);
    assert_int_equal(chmod(dir, 0700), 0);
    assert_int_equal(secret_file_read(dir, out, sizeof(out), err, sizeof(err)), -1);
    unlink(path);
    rmdir(dir);
}

static void test_redis_auth_options(void **state)
{
    (void)state;
    redis_auth a;
    const char *argv[3];
    assert_int_equal(redis_auth_from_options(&a, "", "", ""), 0);
    assert_false(redis_auth_wanted(&a));
    assert_int_equal(redis_auth_from_options(&a, "", "pw", ""), 0); /* requirepass: AUTH password */
    assert_true(redis_auth_wanted(&a));
    assert_int_equal(redis_auth_argv(&a, argv), 2);
    assert_string_equal(argv[1], "pw");
    assert_int_equal(redis_auth_from_options(&a, "gantry-worker", "pw", ""), 0); /* ACL: AUTH user password */
    assert_int_equal(redis_auth_argv(&a, argv), 3);
    assert_string_equal(argv[0], "AUTH");
    assert_string_equal(argv[1], "gantry-worker");
    assert_string_equal(argv[2], "pw");
    assert_int_equal(redis_auth_from_options(&a, "gantry-worker", "", ""), -1); /* a user needs a password */
    assert_int_equal(redis_auth_from_options(&a, "", "pw", "/some/file"), -1);  /* not both */
    assert_int_equal(redis_auth_from_options(&a, "two words", "pw", ""), -1);
}

static void test_default_state(void **state)
{
    (void)state;
    char out[256];
    assert_int_equal(path_default_state("workers", out, sizeof(out)), 0);
    if (geteuid() == 0)
        assert_string_equal(out, "/var/lib/gantry/workers");
    else
        assert_non_null(strstr(out, "/gantry/workers"));
    assert_int_equal(path_default_state("", out, 8), -1); /* does not fit */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_config_flag_separate_value),
        cmocka_unit_test(test_config_flag_equals_value),
        cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_config_flag_overrides_file),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_help),
        cmocka_unit_test(test_config_config_without_value),
        cmocka_unit_test(test_clock_iso8601_negative),
        cmocka_unit_test(test_clock_iso8601),
        cmocka_unit_test(test_clock_parse_iso8601),
        cmocka_unit_test(test_clock_duration),
        cmocka_unit_test(test_clock_now),
        cmocka_unit_test(test_id_random),
        cmocka_unit_test(test_id_random_unique),
        cmocka_unit_test(test_id_random_too_small),
        cmocka_unit_test(test_id_sortable),
        cmocka_unit_test(test_id_sequential),
        cmocka_unit_test(test_jobstate_names),
        cmocka_unit_test(test_jobstate_transitions),
        cmocka_unit_test(test_job_type_valid),
        cmocka_unit_test(test_job_type_traits),
        cmocka_unit_test(test_job_priority),
        cmocka_unit_test(test_msg_task_roundtrip),
        cmocka_unit_test(test_msg_task_limits),
        cmocka_unit_test(test_msg_task_roots),
        cmocka_unit_test(test_msg_task_decode_rejects),
        cmocka_unit_test(test_msg_task_decode_id_lengths),
        cmocka_unit_test(test_msg_event_init),
        cmocka_unit_test(test_msg_event_roundtrip_result),
        cmocka_unit_test(test_msg_event_roundtrip_progress_absent),
        cmocka_unit_test(test_msg_event_decode_minimal_and_rejects),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_secret_file_read),
        cmocka_unit_test(test_redis_auth_options),
        cmocka_unit_test(test_default_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
