/* workers/program: the sandbox's argv (pure), rotated logs, the metrics reader, and
 * ranks run for real under bubblewrap with /bin/sh scripts: the environment, what the
 * sandbox lets a program see and write, exit codes and signals told apart, SIGTERM
 * then SIGKILL over a tree of background processes (none left in /proc), the memory,
 * wall-clock, process and open-file limits.  The parts that run bwrap need root and a
 * kernel that lets bwrap make pid and mount namespaces; without them they are skipped
 * with the reason (the pure parts still run). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "workers/program/prog_logcap.h"
#include "workers/program/prog_metrics.h"
#include "workers/program/prog_netfence.h"
#include "workers/program/prog_rank.h"
#include "workers/program/prog_sandbox.h"

static char base[64], work[128], data[128], other[128], state[128], ckpt[128], out[128], met[128], logs[128];
static char init_bin[PATH_MAX];
static char no_sandbox[PATH_MAX + 600]; /* why the sandbox cannot run here ("" it can) */

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* a rank running script (in the workdir) with /bin/sh */
static prog_rank_spec spec_for(const char *script)
{
    static char path[256];
    static const char *argv[4];
    static const char *roots[2];
    snprintf(path, sizeof(path), "%s/%s", work, script);
    argv[0] = "/bin/sh";
    argv[1] = path;
    argv[2] = NULL;
    roots[0] = data;
    roots[1] = NULL;
    prog_rank_spec s = {
        .argv = argv,
        .workdir = work,
        .data_roots = roots,
        .checkpoint_dir = ckpt,
        .output_dir = out,
        .metrics_dir = met,
        .log_dir = logs,
        .rank = 0,
        .grace_s = 2,
        .init = init_bin,
    };
    return s;
}

static void script(const char *name, const char *text)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", work, name);
    write_file(p, text, 0644);
}

/* runs to the end (at most 60 s) and returns the rank, not freed */
static prog_rank *run(const prog_rank_spec *s)
{
    char err[512] = "";
    prog_rank *r = prog_rank_start(s, err, sizeof(err));
    if (!r) fail_msg("prog_rank_start: %s", err);
    if (!prog_rank_wait(r, 60)) fail_msg("the rank did not end within 60 s");
    return r;
}

static int setup(void **state_)
{
    (void)state_;
    snprintf(base, sizeof(base), "/tmp/gantry-program-XXXXXX");
    if (!mkdtemp(base)) return -1;
    chmod(base, 0755);
    const struct {
        char *dst;
        const char *name;
    } dirs[] = {{work, "tenant/work"},        {data, "tenant"},           {other, "other-tenant"},    {state, "state"},
                {ckpt, "state/jobs/j1/ckpt"}, {out, "state/jobs/j1/out"}, {met, "state/jobs/j1/run"}, {logs, "state/jobs/j1/logs"}};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
        snprintf(dirs[i].dst, 128, "%s/%s", base, dirs[i].name);
    const char *mk[] = {"tenant",
                        "tenant/work",
                        "other-tenant",
                        "state",
                        "state/jobs",
                        "state/jobs/j1",
                        "state/jobs/j1/ckpt",
                        "state/jobs/j1/out",
                        "state/jobs/j1/run",
                        "state/jobs/j1/logs"};
    for (size_t i = 0; i < sizeof(mk) / sizeof(mk[0]); i++) {
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", base, mk[i]);
        if (mkdir(p, 0755) != 0) return -1;
    }
    char p[256];
    snprintf(p, sizeof(p), "%s/admin.token", state);
    write_file(p, "gty_admin_secret\n", 0644); /* readable by anyone who can see it: the sandbox must hide it */
    snprintf(p, sizeof(p), "%s/secret", other);
    write_file(p, "other tenant's data\n", 0644);
    snprintf(p, sizeof(p), "%s/dump.rdb", state);
    write_file(p, "redis data\n", 0644);
    snprintf(p, sizeof(p), "%s/data.csv", data);
    write_file(p, "1,2,3\n", 0644);

    /* gantry-rank-init is built at the build directory's top level, beside gantry-worker: build/tests/unit/test_program -> build */
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *d = dirname(dirname(dirname(exe)));
    snprintf(init_bin, sizeof(init_bin), "%s/gantry-rank-init", d);

    if (geteuid() != 0)
        snprintf(no_sandbox, sizeof(no_sandbox), "not root (the launcher chowns directories and makes cgroups)");
    else if (access("/usr/bin/bwrap", X_OK) != 0)
        snprintf(no_sandbox, sizeof(no_sandbox), "/usr/bin/bwrap is not installed");
    else if (access(init_bin, X_OK) != 0)
        snprintf(no_sandbox, sizeof(no_sandbox), "%s is not built", init_bin);
    if (!no_sandbox[0]) { /* can bwrap make its namespaces here? */
        script("true.sh", "exit 0\n");
        prog_rank_spec s = spec_for("true.sh");
        char err[512];
        prog_rank *r = prog_rank_start(&s, err, sizeof(err));
        if (!r)
            snprintf(no_sandbox, sizeof(no_sandbox), "%s", err);
        else {
            prog_rank_wait(r, 30);
            const prog_rank_status *st = prog_rank_status_of(r);
            if (st->end != PROG_RANK_EXITED || st->code != 0)
                snprintf(no_sandbox, sizeof(no_sandbox), "bwrap cannot run here: %s", st->reason);
            prog_rank_free(r);
        }
    }
    if (no_sandbox[0]) fprintf(stderr, "test_program: the sandboxed tests are skipped: %s\n", no_sandbox);
    return 0;
}

static int teardown(void **state_)
{
    (void)state_;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
    return system(cmd) == 0 ? 0 : -1;
}

#define NEED_SANDBOX()                                                                                                             \
    do {                                                                                                                           \
        if (no_sandbox[0]) {                                                                                                       \
            print_message("skipped: %s\n", no_sandbox);                                                                            \
            skip();                                                                                                                \
        }                                                                                                                          \
    } while (0)

static int has_arg(char **argv, const char *a, const char *b)
{
    for (int i = 0; argv[i]; i++)
        if (strcmp(argv[i], a) == 0 && (!b || (argv[i + 1] && strcmp(argv[i + 1], b) == 0))) return 1;
    return 0;
}

static void test_argv(void **state_)
{
    (void)state_;
    const char *system[] = {"/usr", "/etc/passwd", NULL};
    prog_sandbox_bind links[] = {{"usr/bin", "/bin"}};
    prog_sandbox_bind ro[] = {{"/srv/data/vision", "/srv/data/vision"}};
    prog_sandbox_bind rw[] = {{"/var/lib/gantry/jobs/j1/ckpt", PROG_SANDBOX_CHECKPOINT_DIR}};
    const char *prog[] = {"python3", "train.py", NULL};
    prog_sandbox_desc d = {.bwrap = "/usr/bin/bwrap",
                           .system = system,
                           .links = links,
                           .n_links = 1,
                           .ro = ro,
                           .n_ro = 1,
                           .rw = rw,
                           .n_rw = 1,
                           .init = "/opt/gantry/gantry-rank-init",
                           .cwd = "/srv/data/vision",
                           .tmp_bytes = 1 << 20,
                           .uid = 65534,
                           .gid = 65534,
                           .status_fd = 3,
                           .argv = prog};
    char err[256];
    char **a = prog_sandbox_argv(&d, err, sizeof(err));
    assert_non_null(a);
    assert_string_equal(a[0], "/usr/bin/bwrap");
    assert_true(has_arg(a, "--unshare-pid", NULL));
    assert_true(has_arg(a, "--die-with-parent", NULL));
    assert_true(has_arg(a, "--new-session", NULL));
    assert_false(has_arg(a, "--unshare-net", NULL)); /* the ranks reach each other */
    assert_false(has_arg(a, "--unshare-all", NULL));
    assert_true(has_arg(a, "--ro-bind-try", "/usr"));
    assert_true(has_arg(a, "--ro-bind", "/srv/data/vision"));
    assert_true(has_arg(a, "--bind", "/var/lib/gantry/jobs/j1/ckpt"));
    assert_true(has_arg(a, "--tmpfs", "/tmp"));
    assert_true(has_arg(a, "--size", "1048576"));
    assert_true(has_arg(a, "--uid=65534", NULL));
    /* never the whole of /, never /etc whole */
    for (int i = 0; a[i]; i++) {
        if (strcmp(a[i], "--bind") == 0 || strcmp(a[i], "--ro-bind") == 0 || strcmp(a[i], "--ro-bind-try") == 0) {
            assert_string_not_equal(a[i + 1], "/");
            assert_string_not_equal(a[i + 1], "/etc");
        }
    }
    /* the program comes last, after the init and "--" */
    int n = 0;
    while (a[n])
        n++;
    assert_string_equal(a[n - 1], "train.py");
    assert_string_equal(a[n - 2], "python3");
    assert_string_equal(a[n - 3], "--");
    prog_sandbox_argv_free(a);
    for (const char *const *p = prog_sandbox_default_system; *p; p++)
        assert_string_not_equal(*p, "/etc");
    /* the rank init from a descriptor: its host path appears nowhere (bwrap copies it in) */
    d.init_fd = 5;
    a = prog_sandbox_argv(&d, err, sizeof(err));
    assert_non_null(a);
    assert_true(has_arg(a, "--ro-bind-data", "5"));
    for (int i = 0; a[i]; i++)
        assert_null(strstr(a[i], "/opt/gantry"));
    prog_sandbox_argv_free(a);
    d.init_fd = 0;

    /* errors name the field */
    prog_sandbox_bind bad[] = {{"/x", "relative/path"}};
    d.rw = bad;
    assert_null(prog_sandbox_argv(&d, err, sizeof(err)));
    assert_non_null(strstr(err, "rw[0].dst"));
    bad[0].dst = "/proc/x";
    assert_null(prog_sandbox_argv(&d, err, sizeof(err)));
    assert_non_null(strstr(err, "rw[0].dst"));
    bad[0].dst = "/a/../etc";
    assert_null(prog_sandbox_argv(&d, err, sizeof(err)));
    bad[0].dst = "/usr/lib/x";
    assert_null(prog_sandbox_argv(&d, err, sizeof(err)));
    assert_non_null(strstr(err, "read-only system path"));
    d.rw = rw;
    d.uid = 0;
    assert_null(prog_sandbox_argv(&d, err, sizeof(err)));
    assert_non_null(strstr(err, "uid"));
    d.uid = 65534;
    d.argv = (const char *[]){NULL};
    assert_null(prog_sandbox_argv(&d, err, sizeof(err)));
    assert_non_null(strstr(err, "argv"));
    d.argv = prog;

    /* a GPU worker's device nodes: bound inside the new /dev (after --dev), skipped when missing; only
     * nodes directly in /dev */
    d.devices = (const char *[]){"/dev/nvidiactl", "/dev/nvidia0", NULL};
    a = prog_sandbox_argv(&d, err, sizeof(err));
    assert_non_null(a);
    int dev = -1, gpu = -1;
    for (int i = 0; a[i]; i++) {
        if (strcmp(a[i], "--dev") == 0) dev = i;
        if (strcmp(a[i], "--dev-bind-try") == 0 && strcmp(a[i + 1], "/dev/nvidia0") == 0) gpu = i;
    }
    assert_true(dev >= 0 && gpu > dev);
    assert_string_equal(a[gpu + 2], "/dev/nvidia0");
    assert_true(has_arg(a, "--dev-bind-try", "/dev/nvidiactl"));
    prog_sandbox_argv_free(a);
    const char *bad_devices[] = {"/etc/shadow", "/dev/../etc/shadow", "/dev/dri/card0", "dev/nvidia0", "/dev/"};
    for (size_t i = 0; i < sizeof(bad_devices) / sizeof(bad_devices[0]); i++) {
        d.devices = (const char *[]){"/dev/nvidiactl", bad_devices[i], NULL};
        assert_null(prog_sandbox_argv(&d, err, sizeof(err)));
        assert_non_null(strstr(err, "devices[1]"));
    }
}

static void test_log_rotation_and_follow(void **state_)
{
    (void)state_;
    char dir[128];
    snprintf(dir, sizeof(dir), "%s/logtest", base);
    mkdir(dir, 0755);
    prog_logcap *l = prog_logcap_open(dir, 7, 100);
    assert_non_null(l);
    prog_logcap_follow f;
    prog_logcap_follow_init(&f, dir, 7);
    char buf[4096];
    assert_int_equal(prog_logcap_write(l, "line 1\nline 2\n", 14), 0);
    assert_int_equal(prog_logcap_follow_read(&f, buf, sizeof(buf)), 14);
    assert_int_equal(prog_logcap_follow_read(&f, buf, sizeof(buf)), 0);
    /* 20 lines of 10 bytes: two rotations, never a file over the cap */
    char got[8192] = "";
    for (int i = 0; i < 20; i++) {
        char line[16];
        snprintf(line, sizeof(line), "line %04d\n", i);
        assert_int_equal(prog_logcap_write(l, line, 10), 0);
        ssize_t n;
        while ((n = prog_logcap_follow_read(&f, buf, 7)) > 0) /* small reads across the rotations */
            strncat(got, buf, (size_t)n);
    }
    char expect[8192] = "";
    for (int i = 0; i < 20; i++) {
        char line[16];
        snprintf(line, sizeof(line), "line %04d\n", i);
        strcat(expect, line);
    }
    assert_string_equal(got, expect);
    char p[256];
    prog_logcap_path(dir, 7, "", p, sizeof(p));
    assert_true(file_size(p) <= 100);
    prog_logcap_path(dir, 7, ".1", p, sizeof(p));
    assert_int_equal(file_size(p), 100);
    char *t = prog_logcap_tail(dir, 7, 3, 1 << 16);
    assert_string_equal(t, "line 0017\nline 0018\nline 0019\n");
    free(t);
    t = prog_logcap_tail(dir, 7, 11, 1 << 16); /* across the two files (114 bytes kept: the last 11 lines and a bit) */
    assert_true(strncmp(t, "line 0009\n", 10) == 0);
    assert_non_null(strstr(t, "line 0019\n"));
    free(t);
    prog_logcap_close(l);
}

static void test_metrics_reader(void **state_)
{
    (void)state_;
    char p[256], err[256];
    snprintf(p, sizeof(p), "%s/metrics.jsonl", base);
    prog_metrics *m = prog_metrics_new(p, 64, 0);
    json_t *pts = json_array();
    assert_int_equal(prog_metrics_read(m, pts, err, sizeof(err)), 0); /* no file yet */
    FILE *f = fopen(p, "w");
    fputs("{\"epoch\":1,\"loss\":0.5}\n{\"epoch\":2,", f);
    fflush(f);
    assert_int_equal(prog_metrics_read(m, pts, err, sizeof(err)), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(pts, 0), "epoch")), 1);
    fputs("\"loss\":0.4}\nnot json\n[1,2]\n\n", f); /* the partial line completed, then two bad lines and a blank */
    fputs("{\"long\":\"", f);
    for (int i = 0; i < 100; i++)
        fputc('x', f);
    fputs("\"}\n{\"epoch\":3,\"test_accuracy\":0.9}\n{\"partial\":", f);
    fflush(f);
    assert_int_equal(prog_metrics_read(m, pts, err, sizeof(err)), 2);
    assert_int_equal(json_array_size(pts), 3);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(pts, 1), "epoch")), 2);
    assert_true(json_real_value(json_object_get(json_array_get(pts, 2), "test_accuracy")) > 0.89);
    assert_int_equal(prog_metrics_bad_lines(m), 3);
    fclose(f);
    json_decref(pts);
    prog_metrics_free(m);

    /* a link (to a file the program should not read through the worker) is refused */
    char target[256];
    snprintf(target, sizeof(target), "%s/admin.token", state);
    unlink(p);
    assert_int_equal(symlink(target, p), 0);
    m = prog_metrics_new(p, 0, 0);
    pts = json_array();
    assert_int_equal(prog_metrics_read(m, pts, err, sizeof(err)), -1);
    unlink(p);
    assert_int_equal(link(target, p), 0); /* a hard link is not a file of its own */
    assert_int_equal(prog_metrics_read(m, pts, err, sizeof(err)), -1);
    unlink(p);
    json_decref(pts);
    prog_metrics_free(m);
}

static void test_env_is_exact(void **state_)
{
    (void)state_;
    NEED_SANDBOX();
    script("env.sh", "tr '\\0' '\\n' < /proc/$$/environ | sort > $GANTRY_OUTPUT_DIR/env\nid -u > $GANTRY_OUTPUT_DIR/uid\n"
                     "pwd > $GANTRY_OUTPUT_DIR/pwd\n");
    prog_rank_spec s = spec_for("env.sh");
    setenv("GANTRY_ADMIN_TOKEN", "gty_must_not_leak", 1);
    setenv("REDIS_URL", "redis://:pw@127.0.0.1:6379", 1);
    const char *env[] = {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "LR=0.01", "HOME=/tmp/home", NULL};
    s.env = env;
    prog_rank *r = run(&s);
    assert_int_equal(prog_rank_status_of(r)->end, PROG_RANK_EXITED);
    assert_int_equal(prog_rank_status_of(r)->code, 0);
    prog_rank_free(r);
    char p[256];
    snprintf(p, sizeof(p), "%s/env", out);
    char *e = read_all(p);
    assert_non_null(e);
    char expect[1024];
    snprintf(expect, sizeof(expect),
             "GANTRY_CHECKPOINT_DIR=/gantry/checkpoint\n"
             "GANTRY_METRICS=/gantry/run/metrics.jsonl\n"
             "GANTRY_OUTPUT_DIR=/gantry/output\n"
             "HOME=/tmp/home\n"
             "LANG=C.UTF-8\n"
             "LR=0.01\n"
             "MASTER_ADDR=127.0.0.1\n"
             "PATH=/usr/local/bin:/usr/bin:/bin\n"
             "PWD=%s\n"
             "RANK=1\n"
             "WORLD_SIZE=2\n",
             work);
    assert_string_equal(e, expect);
    free(e);
    snprintf(p, sizeof(p), "%s/uid", out);
    e = read_all(p);
    assert_string_equal(e, "65534\n");
    free(e);
    snprintf(p, sizeof(p), "%s/pwd", out);
    e = read_all(p);
    snprintf(expect, sizeof(expect), "%s\n", work);
    assert_string_equal(e, expect);
    free(e);
    unsetenv("GANTRY_ADMIN_TOKEN");
    unsetenv("REDIS_URL");

    const char *bad_env[] = {"1BAD=x", NULL};
    s.env = bad_env;
    char err[256];
    assert_null(prog_rank_start(&s, err, sizeof(err)));
    assert_non_null(strstr(err, "env[0]"));
}

static void test_confinement(void **state_)
{
    (void)state_;
    NEED_SANDBOX();
    char text[4096];
    /* each probe prints "<name> ok" or "<name> denied"; the script reports, the test judges */
    snprintf(text, sizeof(text),
             "probe() { name=$1; shift; if \"$@\" >/dev/null 2>&1; then echo \"$name ok\"; else echo \"$name denied\"; fi; }\n"
             "probe read-admin-token cat %s/admin.token\n"
             "probe read-redis-data cat %s/dump.rdb\n"
             "probe list-state ls %s\n"
             "probe read-other-tenant cat %s/secret\n"
             "probe read-data cat %s/data.csv\n"
             "probe read-shadow cat /etc/shadow\n"
             "probe see-etc-gantry ls /etc/gantry\n"
             "probe read-worker-proc cat /proc/1/environ\n"
             "probe write-data sh -c 'echo x > %s/new'\n"
             "probe write-work sh -c 'echo x > %s/new'\n"
             "probe write-usr sh -c 'echo x > /usr/new'\n"
             "probe write-root sh -c 'echo x > /new'\n"
             "probe write-tmp sh -c 'echo x > /tmp/new'\n"
             "probe write-ckpt sh -c 'echo x > $GANTRY_CHECKPOINT_DIR/ck'\n"
             "probe write-metrics sh -c 'echo {} > $GANTRY_METRICS'\n"
             "probe write-output sh -c 'echo x > $GANTRY_OUTPUT_DIR/model.pt'\n"
             "probe python /usr/bin/python3 -c 'import json'\n",
             state, state, state, other, data, data, work);
    script("probe.sh", text);
    prog_rank_spec s = spec_for("probe.sh");
    prog_rank *r = run(&s);
    assert_int_equal(prog_rank_status_of(r)->end, PROG_RANK_EXITED);
    prog_rank_free(r);
    char *log = prog_logcap_tail(logs, 0, 100, 1 << 16);
    print_message("%s", log);
    const char *expect[] = {"read-admin-token denied",
                            "read-redis-data denied",
                            "list-state denied",
                            "read-other-tenant denied",
                            "read-data ok",
                            "read-shadow denied",
                            "see-etc-gantry denied",
                            "read-worker-proc denied",
                            "write-data denied",
                            "write-work denied",
                            "write-usr denied",
                            "write-root denied",
                            "write-tmp ok",
                            "write-ckpt ok",
                            "write-metrics ok",
                            "write-output ok"};
    for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++)
        if (!strstr(log, expect[i])) fail_msg("expected \"%s\" in:\n%s", expect[i], log);
    if (access("/usr/bin/python3", X_OK) == 0) assert_non_null(strstr(log, "python ok"));
    free(log);
    char p[256];
    snprintf(p, sizeof(p), "%s/model.pt", out);
    assert_true(file_size(p) > 0);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_uid, PROG_RANK_NOBODY); /* written as the unprivileged user */
}

static void test_exit_codes_and_signals(void **state_)
{
    (void)state_;
    NEED_SANDBOX();
    script("three.sh", "for i in 1 2 3 4 5 6 7 8 9 10; do echo \"step $i\"; done\necho 'Traceback: boom' >&2\nexit 3\n");
    prog_rank_spec s = spec_for("three.sh");
    prog_rank *r = run(&s);
    const prog_rank_status *st = prog_rank_status_of(r);
    assert_int_equal(st->end, PROG_RANK_EXITED);
    assert_int_equal(st->code, 3);
    assert_string_equal(st->reason, "exited with code 3");
    prog_rank_free(r);
    char *t = prog_logcap_tail(logs, 0, 2, 1 << 16);
    assert_string_equal(t, "step 10\nTraceback: boom\n");
    free(t);

    script("137.sh", "exit 137\n"); /* an exit code of 137 is not a SIGKILL */
    s = spec_for("137.sh");
    r = run(&s);
    assert_int_equal(prog_rank_status_of(r)->end, PROG_RANK_EXITED);
    assert_int_equal(prog_rank_status_of(r)->code, 137);
    prog_rank_free(r);

    script("segv.sh", "kill -s SEGV $$\n");
    s = spec_for("segv.sh");
    r = run(&s);
    assert_int_equal(prog_rank_status_of(r)->end, PROG_RANK_SIGNALED);
    assert_int_equal(prog_rank_status_of(r)->code, SIGSEGV);
    assert_non_null(strstr(prog_rank_status_of(r)->reason, "signal 11"));
    prog_rank_free(r);

    const char *argv[] = {"no-such-program", NULL};
    s = spec_for("true.sh");
    s.argv = argv;
    r = run(&s);
    assert_int_equal(prog_rank_status_of(r)->end, PROG_RANK_LAUNCH_FAILED);
    assert_non_null(strstr(prog_rank_status_of(r)->reason, "cannot run no-such-program"));
    prog_rank_free(r);

    /* a bind bwrap cannot make: the launch fails with bwrap's own words */
    s = spec_for("true.sh");
    char err[256];
    s.workdir = "/nonexistent/work";
    assert_null(prog_rank_start(&s, err, sizeof(err)));
    assert_non_null(strstr(err, "workdir"));
}

/* the processes of the rank now */
static int count(unsigned long long ns)
{
    pid_t pids[64];
    return prog_rank_ns_pids(ns, pids, 64);
}

static void test_terminate_tree(void **state_)
{
    (void)state_;
    NEED_SANDBOX();
    /* a tree that ignores SIGTERM: background sleeps, a grandchild in its own session */
    script("stubborn.sh", "trap '' TERM\nsleep 1000 &\nsleep 1000 &\nsh -c 'sleep 1000 & wait' &\nsetsid sleep 1000 &\n"
                          "echo started\nwhile :; do sleep 1; done\n");
    prog_rank_spec s = spec_for("stubborn.sh");
    s.grace_s = 1;
    char err[256];
    prog_rank *r = prog_rank_start(&s, err, sizeof(err));
    assert_non_null(r);
    for (int i = 0; i < 100; i++) { /* until the tree is up */
        prog_rank_poll(r, 100);
        if (prog_rank_pidns(r) && count(prog_rank_pidns(r)) >= 8) break;
    }
    unsigned long long ns = prog_rank_pidns(r);
    assert_true(ns != 0);
    assert_true(count(ns) >= 8); /* pid 1, init, sh, 5 sleeps (and sh -c) */
    prog_rank_terminate(r);
    assert_int_equal(prog_rank_poll(r, 500), 0); /* SIGTERM ignored: still there within the grace period */
    assert_true(prog_rank_wait(r, 10));
    const prog_rank_status *st = prog_rank_status_of(r);
    assert_int_equal(st->end, PROG_RANK_TERMINATED);
    assert_true(st->killed);
    assert_true(st->runtime_s >= 1.0);
    assert_non_null(strstr(st->reason, "SIGKILL after the 1 s grace period"));
    prog_rank_free(r);
    assert_int_equal(count(ns), 0); /* not one process of the rank survives */

    /* a program that handles SIGTERM: checkpoints and exits, no SIGKILL needed */
    script("graceful.sh", "trap 'echo checkpointed > $GANTRY_CHECKPOINT_DIR/ck; exit 0' TERM\nsleep 1000 &\n"
                          "echo ready\nwhile :; do sleep 0.1; done\n");
    s = spec_for("graceful.sh");
    s.grace_s = 20;
    r = prog_rank_start(&s, err, sizeof(err));
    assert_non_null(r);
    for (int i = 0; i < 100; i++) {
        prog_rank_poll(r, 100);
        char *t = prog_logcap_tail(logs, 0, 1, 100);
        int ready = strstr(t, "ready") != NULL;
        free(t);
        if (ready) break;
    }
    ns = prog_rank_pidns(r);
    prog_rank_terminate(r);
    assert_true(prog_rank_wait(r, 10));
    st = prog_rank_status_of(r);
    assert_int_equal(st->end, PROG_RANK_TERMINATED);
    assert_false(st->killed);
    assert_true(st->runtime_s < 15);
    assert_non_null(strstr(st->reason, "exited with code 0"));
    prog_rank_free(r);
    assert_int_equal(count(ns), 0);
    char p[256];
    snprintf(p, sizeof(p), "%s/ck", ckpt);
    char *ck = read_all(p);
    assert_string_equal(ck, "checkpointed\n");
    free(ck);
}

static void test_limits(void **state_)
{
    (void)state_;
    NEED_SANDBOX();
    /* wall clock */
    script("sleepy.sh", "sleep 1000\n");
    prog_rank_spec s = spec_for("sleepy.sh");
    s.max_runtime_s = 1;
    s.grace_s = 1;
    prog_rank *r = run(&s);
    const prog_rank_status *st = prog_rank_status_of(r);
    assert_int_equal(st->end, PROG_RANK_RUNTIME);
    assert_true(st->runtime_s >= 1 && st->runtime_s < 5);
    assert_non_null(strstr(st->reason, "wall-clock limit of 1 s"));
    prog_rank_free(r);

    /* memory: 64 MiB, the script asks for 512 */
    if (access("/usr/bin/python3", X_OK) == 0) {
        script("hog.py", "x = bytearray(512 << 20)\nprint('survived')\n");
        s = spec_for("hog.py");
        const char *argv[] = {"/usr/bin/python3", "hog.py", NULL};
        s.argv = argv;
        s.memory_bytes = 64 << 20;
        r = run(&s);
        st = prog_rank_status_of(r);
        print_message("memory limit by %s: %s\n", prog_rank_memory_mode(r), st->reason);
        assert_int_equal(st->end, PROG_RANK_MEMORY);
        assert_non_null(strstr(st->reason, "memory limit of 64 MiB"));
        prog_rank_free(r);
    }

    /* open files and processes */
    script("limits.sh", "ulimit -n\nfor i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do sleep 5 & done 2>&1\n"
                        "echo forked\n");
    s = spec_for("limits.sh");
    s.max_open_files = 100;
    s.max_procs = 8;
    r = run(&s);
    prog_rank_free(r);
    char *t = prog_logcap_tail(logs, 0, 100, 1 << 16);
    print_message("%s", t);
    assert_true(strncmp(t, "100\n", 4) == 0);
    assert_non_null(strstr(t, "fork")); /* "Cannot fork" from the shell: the limit held */
    free(t);
}

static void test_rank_log_rotation(void **state_)
{
    (void)state_;
    NEED_SANDBOX();
    script("chatty.sh", "i=0\nwhile [ $i -lt 5000 ]; do echo \"line $i of the output\"; i=$((i+1)); done\necho last line\n");
    prog_rank_spec s = spec_for("chatty.sh");
    s.log_cap = 16384;
    prog_rank *r = run(&s);
    assert_int_equal(prog_rank_status_of(r)->end, PROG_RANK_EXITED);
    prog_rank_free(r);
    char p[256];
    prog_logcap_path(logs, 0, "", p, sizeof(p));
    assert_true(file_size(p) <= 16384);
    prog_logcap_path(logs, 0, ".1", p, sizeof(p));
    assert_int_equal(file_size(p), 16384);
    char *t = prog_logcap_tail(logs, 0, 2, 1 << 16);
    assert_string_equal(t, "line 4999 of the output\nlast line\n");
    free(t);
}

/* the nftables scripts of the network fence (prog_netfence.h): what each worker writes, and nothing of another's */
static void test_netfence_scripts(void **state_)
{
    (void)state_;
    unsigned uid = prog_netfence_default_uid("w_a");
    assert_true(uid >= PROG_NETFENCE_UID_MIN && uid <= PROG_NETFENCE_UID_MAX);
    assert_true(prog_netfence_default_uid("w_a") == uid && prog_netfence_job_gid("j_1") >= PROG_NETFENCE_UID_MIN &&
                prog_netfence_job_gid("j_1") <= PROG_NETFENCE_UID_MAX);
    uint32_t mark = prog_netfence_job_mark("j_1");
    assert_true((mark & PROG_NETFENCE_MARK_BIT) && mark == prog_netfence_job_mark("j_1") && mark != prog_netfence_job_mark("j_2"));

    char *setup = prog_netfence_script_setup(1879048200u);
    assert_non_null(strstr(setup, "add table inet gantry\n"));
    assert_non_null(strstr(setup, "flush chain inet gantry output\n")); /* the shared chain: replaced, never appended to */
    assert_non_null(strstr(setup, "add rule inet gantry output meta skuid 1879048192-1879113727 meta skuid vmap @slots\n"));
    assert_non_null(strstr(setup, "add rule inet gantry output meta skuid 1879048192-1879113727 drop\n"));
    assert_non_null(
        strstr(setup, "add rule inet gantry prerouting iifname != \"lo\" ip dscp 0x2f ct state new ct mark set 0x80000000\n"));
    assert_non_null(strstr(setup, "flush chain inet gantry slot_1879048200\nadd rule inet gantry slot_1879048200 drop\n"));
    assert_non_null(strstr(setup, "add element inet gantry slots { 1879048200 : jump slot_1879048200 }\n"));
    assert_null(strstr(setup, "delete")); /* nothing of another worker's */
    free(setup);

    const char *peers[] = {"10.0.0.1", "fd00::2", "10.0.0.3"};
    char err[200] = "";
    char *job = prog_netfence_script_job(1879048200u, 0x80000123u, peers, 3, err, sizeof(err));
    assert_non_null(job);
    const char *want[] = {
        "add rule inet gantry slot_1879048200 ct direction reply ct mark 0x80000123 accept\n",
        "add rule inet gantry slot_1879048200 ct direction reply ct mark 0x80000000 ip daddr { 10.0.0.1, 10.0.0.3 } accept\n",
        "add rule inet gantry slot_1879048200 ct direction reply ct mark 0x80000000 ip6 daddr { fd00::2 } accept\n",
        "add rule inet gantry slot_1879048200 ct direction reply ct mark and 0x80000000 == 0x80000000 drop\n",
        "add rule inet gantry slot_1879048200 ct direction reply ip daddr { 10.0.0.1, 10.0.0.3 } accept\n",
        "add rule inet gantry slot_1879048200 ct direction reply ip6 daddr { fd00::2 } accept\n",
        "add rule inet gantry slot_1879048200 ct direction reply fib daddr type local accept\n",
        "add rule inet gantry slot_1879048200 ct direction reply drop\n",
        "add rule inet gantry slot_1879048200 ct state new meta l4proto tcp fib daddr type local ct mark set 0x80000123 accept\n",
        "add rule inet gantry slot_1879048200 ct state new meta l4proto tcp ip daddr { 10.0.0.1, 10.0.0.3 } ct mark set "
        "0x80000123\n",
        "add rule inet gantry slot_1879048200 ct mark 0x80000123 ip daddr { 10.0.0.1, 10.0.0.3 } ip dscp set 0x2f accept\n",
        "add rule inet gantry slot_1879048200 ct mark 0x80000123 ip6 daddr { fd00::2 } ip6 dscp set 0x2f accept\n",
        "add rule inet gantry slot_1879048200 ct state established,related accept\n",
        "add rule inet gantry slot_1879048200 meta l4proto tcp reject with tcp reset\n",
        "add rule inet gantry slot_1879048200 reject\n",
    };
    const char *at = job;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) { /* in this order */
        const char *w = strstr(at, want[i]);
        if (!w) fail_msg("missing or out of order: %s in\n%s", want[i], job);
        at = w + strlen(want[i]);
    }
    free(job);
    /* a rank with no peer (a 1-rank job): this host only */
    job = prog_netfence_script_job(1879048200u, 0x80000123u, NULL, 0, err, sizeof(err));
    assert_null(strstr(job, "daddr {"));
    free(job);
    const char *bad[] = {"10.0.0.1", "10.0.0.1; flush ruleset"};
    assert_null(prog_netfence_script_job(1879048200u, 0x80000123u, bad, 2, err, sizeof(err)));
    assert_string_equal(err, "peers[1]: 10.0.0.1; flush ruleset is not an IPv4 or IPv6 address");

    char *down = prog_netfence_script_teardown(1879048200u);
    assert_non_null(strstr(down, "delete element inet gantry slots { 1879048200 }\ndelete chain inet gantry slot_1879048200\n"));
    assert_null(strstr(down, "flush chain inet gantry output"));
    free(down);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argv),
        cmocka_unit_test(test_log_rotation_and_follow),
        cmocka_unit_test(test_metrics_reader),
        cmocka_unit_test(test_env_is_exact),
        cmocka_unit_test(test_confinement),
        cmocka_unit_test(test_exit_codes_and_signals),
        cmocka_unit_test(test_terminate_tree),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_rank_log_rotation),
        cmocka_unit_test(test_netfence_scripts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
