/* path_confine: paths in job specs stay under the tenant's roots, and nothing outside
 * the roots changes the answer (no file-existence oracle). */
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

static char base[64], root[128], other[128], root2[128], alias[128];

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
    snprintf(root2, sizeof(root2), "%s/root2", base);
    snprintf(alias, sizeof(alias), "%s/alias", base); /* a root configured through a symlink */
    mkdir(root2, 0700);
    snprintf(p, sizeof(p), "%s/sub", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/b.csv", root2);
    fclose(fopen(p, "w"));
    char target[256];
    struct {
        const char *link, *fmt, *arg;
    } links[] = {
        {"to-secret", "%s/secret", other},       /* out of the root, to a file that exists */
        {"to-nothing", "%s/nonexistent", other}, /* out of the root, to nothing */
        {"to-etc", "%s", "/etc/nonexistent-file"},
        {"sub/up-out", "%s", "../../other/secret"}, /* relative, climbing out */
        {"sub/up-far", "%s", "../../../../../../../../../../etc/passwd"},
        {"sub/up-in", "%s", "../data.csv"}, /* relative, staying inside */
        {"abs-in", "%s/data.csv", root},    /* absolute, inside */
        {"to-root2", "%s/b.csv", root2},    /* into another root */
        {"sub/rel-root2", "%s", "../../root2/b.csv"},
        {"via-alias", "%s/data.csv", alias}, /* absolute through the root's configured name */
        {"chain", "%s", "sub/up-in"},        /* a link to a link */
        {"loop-a", "%s", "loop-b"},
        {"loop-b", "%s", "loop-a"},
        {"dangling", "%s", "not-yet"},
    };
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", root, links[i].link);
        snprintf(target, sizeof(target), links[i].fmt, links[i].arg);
        if (symlink(target, p) != 0) return -1;
    }
    if (symlink(root, alias) != 0) return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
    return system(cmd) == 0 ? 0 : -1;
}

static char last_err[512];

static int confine_in(const char *const *roots, int n, const char *req, bool must_exist, char *out)
{
    last_err[0] = '\0';
    return path_confine(roots, n, req, must_exist, out, PATH_MAX, last_err, sizeof(last_err));
}

static int confine(const char *req, bool must_exist, char *out)
{
    const char *roots[] = {root};
    return confine_in(roots, 1, req, must_exist, out);
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

/* a workdir: a directory under the roots, through links that stay inside too */
static void test_directory(void **state)
{
    (void)state;
    const char *roots[] = {root};
    char out[PATH_MAX], err[256], want[PATH_MAX];
    assert_int_equal(path_confine_dir(roots, 1, "sub", out, sizeof(out), err, sizeof(err)), 0);
    snprintf(want, sizeof(want), "%s/sub", root);
    assert_string_equal(out, want);
    assert_int_equal(path_confine_dir(roots, 1, "", out, sizeof(out), err, sizeof(err)), -1);
    assert_int_equal(path_confine_dir(roots, 1, root, out, sizeof(out), err, sizeof(err)), 0); /* the root itself */
    assert_int_equal(path_confine_dir(roots, 1, "data.csv", out, sizeof(out), err, sizeof(err)), -1);
    assert_string_equal(err, "data.csv is not a directory");
    assert_int_equal(path_confine_dir(roots, 1, "abs-in", out, sizeof(out), err, sizeof(err)), -1); /* a link to a file */
    assert_string_equal(err, "abs-in is not a directory");
    assert_int_equal(path_confine_dir(roots, 1, "escape", out, sizeof(out), err, sizeof(err)), -1); /* a directory outside */
    assert_string_equal(err, PATH_OUTSIDE_ROOTS);
    assert_int_equal(path_confine_dir(roots, 1, "missing", out, sizeof(out), err, sizeof(err)), -1);
    assert_non_null(strstr(err, "does not exist"));
}

static void test_dotdot_in_names_is_fine(void **state)
{
    (void)state;
    char out[PATH_MAX];
    assert_int_equal(confine("file..v2", false, out), 0);
}

static void test_squash_and_below(void **state)
{
    (void)state;
    struct {
        const char *in, *want;
    } cases[] = {{"/a//b/./c/", "/a/b/c"},  {"/", "/"},   {"//", "/"}, {"/.", "/"}, {"/./", "/"},
                 {"a/./b", "a/b"},          {"./a", "a"}, {".", ""},   {"", ""},    {"/a/../b", "/a/../b"},
                 {"/a/.b/..c", "/a/.b/..c"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%s", cases[i].in);
        path_squash(buf);
        assert_string_equal(buf, cases[i].want);
    }
    assert_string_equal(path_below("/srv/data/x/y", "/srv/data"), "x/y");
    assert_string_equal(path_below("/srv/data", "/srv/data"), "");
    assert_null(path_below("/srv/database", "/srv/data"));
    assert_null(path_below("/srv", "/srv/data"));
    assert_null(path_below("srv/data/x", "/srv/data"));
    assert_string_equal(path_below("/etc/passwd", "/"), "etc/passwd");
    assert_null(path_below("/x", ""));
}

/* Every refusal of a path outside the roots is the same string, whether the path (or
 * a symlink's target) exists or not, so the answer tells nothing about the outside. */
static void test_outside_is_one_answer(void **state)
{
    (void)state;
    char out[PATH_MAX], secret[256], nothing[256], viadir[256], viadir_missing[256], sibling[256];
    snprintf(secret, sizeof(secret), "%s/secret", other);
    snprintf(nothing, sizeof(nothing), "%s/nonexistent", other);
    snprintf(viadir, sizeof(viadir), "%s/escape/secret", root);
    snprintf(viadir_missing, sizeof(viadir_missing), "%s/escape/nonexistent", root);
    snprintf(sibling, sizeof(sibling), "%s-sibling/x", root); /* a prefix of the root's name is not under it */
    const char *requests[] = {secret,
                              nothing,
                              "/etc/passwd",
                              "/etc/nonexistent-file",
                              "/etc",
                              "/",
                              viadir,
                              viadir_missing,
                              "escape/secret",
                              "escape/nonexistent",
                              "escape",
                              "to-secret",
                              "to-nothing",
                              "to-etc",
                              "sub/up-out",
                              "sub/up-far",
                              "to-secret/x",
                              sibling,
                              "/proc/self/environ"};
    for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++)
        for (int must_exist = 0; must_exist < 2; must_exist++) {
            assert_int_equal(confine(requests[i], must_exist, out), -1);
            if (strcmp(last_err, PATH_OUTSIDE_ROOTS) != 0) fail_msg("%s: \"%s\"", requests[i], last_err);
        }
    /* inside a root, saying that a file is missing is fine */
    assert_int_equal(confine("missing.csv", true, out), -1);
    assert_non_null(strstr(last_err, "does not exist"));
    assert_int_equal(confine("loop-a", true, out), -1); /* a loop inside the root is not "outside" */
    assert_non_null(strstr(last_err, "does not exist"));
}

static void test_links_that_stay_inside(void **state)
{
    (void)state;
    char out[PATH_MAX], want[PATH_MAX], want2[PATH_MAX];
    snprintf(want, sizeof(want), "%s/data.csv", root);
    snprintf(want2, sizeof(want2), "%s/b.csv", root2);
    const char *to_data[] = {"sub/up-in", "abs-in", "chain", "./sub//up-in"};
    for (size_t i = 0; i < sizeof(to_data) / sizeof(to_data[0]); i++) {
        if (confine(to_data[i], true, out) != 0) fail_msg("%s: %s", to_data[i], last_err);
        assert_string_equal(out, want);
    }
    const char *both[] = {root, root2};
    assert_int_equal(confine_in(both, 2, "to-root2", true, out), 0);
    assert_string_equal(out, want2);
    assert_int_equal(confine_in(both, 2, "sub/rel-root2", true, out), 0); /* up out of one root, into another */
    assert_string_equal(out, want2);
    assert_int_equal(confine("to-root2", true, out), -1); /* ...which must be one of this tenant's */
    assert_string_equal(last_err, PATH_OUTSIDE_ROOTS);
    assert_int_equal(confine("dangling", false, out), 0); /* an output through a link to a new file in the root */
    snprintf(want, sizeof(want), "%s/not-yet", root);
    assert_string_equal(out, want);
    assert_int_equal(confine("dangling", true, out), -1);
    /* a root configured through a symlink: its name and its real path both work */
    const char *aliased[] = {alias};
    char p[256];
    snprintf(p, sizeof(p), "%s/data.csv", alias);
    snprintf(want, sizeof(want), "%s/data.csv", root);
    assert_int_equal(confine_in(aliased, 1, p, true, out), 0);
    assert_string_equal(out, want);
    assert_int_equal(confine_in(aliased, 1, want, true, out), 0);
    assert_int_equal(confine_in(aliased, 1, "data.csv", true, out), 0);
    assert_int_equal(confine_in(aliased, 1, "via-alias", true, out), 0); /* a link naming the root by its alias */
    assert_string_equal(out, want);
    /* with the real root configured, the alias lies outside it: its link is refused without following it */
    assert_int_equal(confine("via-alias", true, out), -1);
    assert_string_equal(last_err, PATH_OUTSIDE_ROOTS);
    assert_int_equal(confine_in(aliased, 1, "escape/secret", true, out), -1);
    assert_string_equal(last_err, PATH_OUTSIDE_ROOTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inside),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_directory),
        cmocka_unit_test(test_dotdot_in_names_is_fine),
        cmocka_unit_test(test_squash_and_below),
        cmocka_unit_test(test_outside_is_one_answer),
        cmocka_unit_test(test_links_that_stay_inside),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
