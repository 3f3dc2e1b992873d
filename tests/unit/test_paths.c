/* path_confine: paths in job specs stay under the tenant's roots. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/paths.h"

static char base[64], root[128], other[128];

static int setup(void **state)
{
    (void)state;
    snprintf(base, sizeof(base), "/tmp/gantry-paths-XXXXXX");
    if (!mkdtemp(base)) return -1;
    snprintf(root, sizeof(root), "%s/root", base);
    snprintf(other, sizeof(other), "%s/other", base);
    mkdir(root, 0700);
    mkdir(other, 0700);
    char p[256];
    snprintf(p, sizeof(p), "%s/data.csv", root);
    fclose(fopen(p, "w"));
    snprintf(p, sizeof(p), "%s/secret", other);
    fclose(fopen(p, "w"));
    snprintf(p, sizeof(p), "%s/escape", root); /* a symlink out of the root */
    if (symlink(other, p) != 0) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
    return system(cmd) == 0 ? 0 : -1;
}

static int confine(const char *req, bool must_exist, char *out)
{
    const char *roots[] = {root};
    char err[256];
    return path_confine(roots, 1, req, must_exist, out, PATH_MAX, err, sizeof(err));
}

static void test_inside(void **state)
{
    (void)state;
    char out[PATH_MAX], want[PATH_MAX];
    assert_int_equal(confine("data.csv", true, out), 0);
    snprintf(want, sizeof(want), "%s/data.csv", root);
    assert_string_equal(out, want);
    char abs[256];
    snprintf(abs, sizeof(abs), "%s/data.csv", root);
    assert_int_equal(confine(abs, true, out), 0);
    assert_int_equal(confine("new-output.ckpt", false, out), 0); /* may not exist yet */
}

static void test_refused(void **state)
{
    (void)state;
    char out[PATH_MAX], abs[256];
    assert_int_equal(confine("", true, out), -1);
    assert_int_equal(confine("../other/secret", true, out), -1);
    assert_int_equal(confine("sub/../../x", false, out), -1);
    assert_int_equal(confine("escape/secret", true, out), -1); /* through the symlink */
    snprintf(abs, sizeof(abs), "%s/secret", other);
    assert_int_equal(confine(abs, true, out), -1);
    assert_int_equal(confine("/etc/passwd", true, out), -1);
    assert_int_equal(confine("missing.csv", true, out), -1);
    assert_int_equal(confine("nodir/x", false, out), -1); /* the parent must exist */
    const char *none[] = {NULL};
    char err[256];
    assert_int_equal(path_confine(none, 0, "data.csv", true, out, sizeof(out), err, sizeof(err)), -1);
    assert_non_null(strstr(err, "no data roots"));
}

static void test_dotdot_in_names_is_fine(void **state)
{
    (void)state;
    char out[PATH_MAX];
    assert_int_equal(confine("file..v2", false, out), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inside),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_dotdot_in_names_is_fine),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
