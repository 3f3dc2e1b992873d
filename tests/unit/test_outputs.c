/* outputs_open (server/outputs.h): a listed output file is opened below the job's output directory
 * only through real directories and only when it is still a regular file of its listed size; a
 * symbolic link anywhere (the file, a directory on the way, the output directory itself), "..", an
 * absolute path are refused.  The routes: tests/integration/test_program_logs.py. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/outputs.h"

static char base[64], out[128];

static void put(const char *rel, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", out, rel);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(base, sizeof base, "/tmp/gantry-outputs-XXXXXX");
    assert_non_null(mkdtemp(base));
    snprintf(out, sizeof out, "%s/output", base);
    char p[256];
    assert_int_equal(mkdir(out, 0700), 0);
    snprintf(p, sizeof p, "%s/sub", out);
    assert_int_equal(mkdir(p, 0700), 0);
    put("model.pt", "12345");
    put("sub/m.json", "{}");
    snprintf(p, sizeof p, "%s/secret", base);
    FILE *f = fopen(p, "w");
    fputs("secret", f);
    fclose(f);
    snprintf(p, sizeof p, "%s/evil", out);
    assert_int_equal(symlink("../secret", p), 0);
    snprintf(p, sizeof p, "%s/up", out);
    assert_int_equal(symlink("..", p), 0);
    snprintf(p, sizeof p, "%s/linked", base);
    assert_int_equal(symlink("output", p), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    return system(cmd) == 0 ? 0 : -1;
}

static int open_rel(const char *dir, const char *rel, int64_t bytes, int *err)
{
    char msg[256];
    *err = 0;
    int fd = outputs_open(dir, rel, bytes, err, msg, sizeof msg);
    if (fd < 0) assert_true(msg[0] != '\0');
    return fd;
}

static void test_listed_files_open(void **state)
{
    (void)state;
    int err;
    int fd = open_rel(out, "model.pt", 5, &err);
    assert_true(fd >= 0);
    char buf[8] = {0};
    assert_int_equal(read(fd, buf, sizeof buf), 5);
    assert_string_equal(buf, "12345");
    close(fd);
    fd = open_rel(out, "sub/m.json", 2, &err);
    assert_true(fd >= 0);
    close(fd);
}

static void test_links_and_escapes_refused(void **state)
{
    (void)state;
    int err;
    assert_int_equal(open_rel(out, "evil", 6, &err), -1); /* a link to a file outside */
    assert_int_equal(err, OUTPUTS_CHANGED);
    assert_int_equal(open_rel(out, "up/secret", 6, &err), -1); /* a link as a directory */
    assert_int_equal(err, OUTPUTS_CHANGED);
    assert_int_equal(open_rel(out, "../secret", 6, &err), -1);
    assert_int_equal(open_rel(out, "sub/../../secret", 6, &err), -1);
    assert_int_equal(open_rel(out, "/etc/passwd", 1, &err), -1);
    assert_int_equal(open_rel(out, "sub", 0, &err), -1); /* a directory */
    assert_int_equal(open_rel(out, "", 0, &err), -1);
    char linked[160];
    snprintf(linked, sizeof linked, "%s/linked", base); /* the output directory itself a link */
    assert_int_equal(open_rel(linked, "model.pt", 5, &err), -1);
    assert_int_equal(open_rel("output", "model.pt", 5, &err), -1); /* a relative directory */
}

static void test_changed_or_gone(void **state)
{
    (void)state;
    int err;
    assert_int_equal(open_rel(out, "model.pt", 4, &err), -1); /* another size than listed */
    assert_int_equal(err, OUTPUTS_CHANGED);
    assert_int_equal(open_rel(out, "missing.pt", 4, &err), -1);
    assert_int_equal(err, OUTPUTS_GONE);
    assert_int_equal(open_rel(out, "sub/missing/x", 4, &err), -1);
    assert_int_equal(err, OUTPUTS_GONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listed_files_open),
        cmocka_unit_test(test_links_and_escapes_refused),
        cmocka_unit_test(test_changed_or_gone),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
