/* test_tsarchive.c - is an upload TorchScript (server/tsarchive.c)?  On the archives torch 1.13
 * wrote (tests/data/torchscript/archives/, made by make_archives.py there): a scripted module is
 * accepted; torch.save of a state_dict or a whole module, a truncated copy, a flipped byte and a
 * text file are refused with their messages.  Then edits of the scripted archive in memory: every
 * prefix of it, a damaged deflated entry, a ZIP64 record moved, a second top-level folder.  The
 * bound on the code (workers/serve/tscode.h): the attacker's archives of
 * tests/data/torchscript/attack whose load would run __setstate__ or overflow the parser's stack
 * are refused naming the entry, the others pass; then tscode_check on hand-written source: where
 * `def __setstate__` counts and where it does not, bracket and indentation depth at and past the
 * bound, strings and comments skipped, and fed a byte at a time the same as whole. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/tsarchive.h"
#include "workers/serve/tscode.h"
#include "testpath.h"

static char msg[512];

static unsigned char *load(const char *name, size_t *len)
{
    char rel[1024];
    snprintf(rel, sizeof(rel), "tests/data/torchscript/archives/%s", name);
    const char *path = source_path(rel);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n ? (size_t)n : 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* the check on an exact-size heap copy (ASan sees any read past it) */
static int check(const unsigned char *b, size_t len)
{
    unsigned char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    if (len) memcpy(copy, b, len);
    msg[0] = '\0';
    int rc = tsarchive_check(copy, len, msg, sizeof(msg));
    free(copy);
    return rc;
}

static void refused(const unsigned char *b, size_t len, const char *expect)
{
    assert_int_equal(check(b, len), -1);
    if (!strstr(msg, expect)) fail_msg("message '%s' lacks '%s'", msg, expect);
}

static void refused_file(const char *name, const char *expect)
{
    size_t len;
    unsigned char *b = load(name, &len);
    refused(b, len, expect);
    free(b);
}

static void test_files(void **state)
{
    (void)state;
    size_t len;
    unsigned char *b = load("scripted.pt", &len);
    assert_int_equal(check(b, len), 0);
    free(b);
    const char *ts = "a torch.save archive, not TorchScript: save the model with torch.jit.script(model).save(path)";
    refused_file("state_dict.pt", ts);
    refused_file("whole_module.pt", ts);
    refused_file("truncated.pt", "truncated: no end of central directory record");
    refused_file("flipped.pt", "damaged: entry 'archive/constants.pkl': CRC mismatch");
    refused_file("text.pt", "not a ZIP archive");
}

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* the offset of the last occurrence of a 4-byte signature */
static size_t last_sig(const unsigned char *b, size_t len, uint32_t sig)
{
    for (size_t i = len - 4;; i--) {
        if (rd32(b + i) == sig) return i;
        if (i == 0) fail_msg("no signature %08x", sig);
    }
}

static void test_edits(void **state)
{
    (void)state;
    size_t len;
    unsigned char *b = load("scripted.pt", &len);
    /* every prefix is refused, never read past */
    for (size_t n = 0; n < len; n++)
        assert_int_equal(check(b, n), -1);
    /* trailing bytes after the end record */
    unsigned char *more = malloc(len + 1);
    memcpy(more, b, len);
    more[len] = 0;
    refused(more, len + 1, "truncated: no end of central directory record");
    free(more);

    /* a byte of a deflated entry (the .py files torch compresses) */
    unsigned char *c = malloc(len);
    memcpy(c, b, len);
    size_t cd = last_sig(c, len, 0x06064b50u); /* the ZIP64 end record: its central directory offset */
    size_t dir = (size_t)(c[cd + 48] | c[cd + 49] << 8 | c[cd + 50] << 16);
    size_t deflated = 0;
    for (size_t p = dir; rd32(c + p) == 0x02014b50u; p += 46 + (c[p + 28] | c[p + 29] << 8) + (c[p + 30] | c[p + 31] << 8)) {
        if ((c[p + 10] | c[p + 11] << 8) == 8) {
            size_t o = rd32(c + p + 42);
            deflated = o + 30 + (c[o + 26] | c[o + 27] << 8) + (c[o + 28] | c[o + 29] << 8);
            break;
        }
    }
    assert_true(deflated > 0);
    c[deflated + 3] ^= 0x40;
    assert_int_equal(check(c, len), -1);
    assert_non_null(strstr(msg, "damaged: entry 'archive/code/"));

    /* the ZIP64 locator pointing elsewhere */
    memcpy(c, b, len);
    size_t loc = last_sig(c, len, 0x07064b50u);
    c[loc + 8] ^= 0x01;
    refused(c, len, "damaged: the ZIP64 end of central directory record is not where its locator says");

    /* the central directory offset outside the file */
    memcpy(c, b, len);
    c[cd + 55] = 0x7f;
    refused(c, len, "the central directory lies outside the file");

    /* a central directory entry renamed into another top-level folder: the local header disagrees */
    memcpy(c, b, len);
    c[dir + 46] = 'b';
    refused(c, len, "does not match the central directory");
    free(c);

    /* a legacy torch.save pickle, an empty archive */
    refused((const unsigned char *)"\x80\x02\x8a\x0al", 5, "a legacy torch.save pickle, not TorchScript");
    static const unsigned char empty[22] = {0x50, 0x4b, 0x05, 0x06};
    refused(empty, sizeof(empty), "an empty ZIP archive");
    refused(NULL, 0, "not a ZIP archive");
    assert_int_equal(tsarchive_check(b, 3, NULL, 0), -1);
    free(b);
}

/* the upload check on the attacker's models (tests/data/torchscript/attack/make.py) */
static void test_attack_archives(void **state)
{
    (void)state;
    refused_file("../attack/setstate_read.pt",
                 "entry 'archive/code/__torch__.py': the model's code defines __setstate__, which torch::jit::load runs");
    refused_file("../attack/setstate_write.pt", "code/__torch__.py': the model's code defines __setstate__");
    refused_file("../attack/deep_nesting.pt", "code/__torch__.py': the model's code brackets nest more than 200 deep (line");
    /* the others are TorchScript archives: the loader's allow list refuses them */
    static const char *const pass[] = {"interface.pt", "fork.pt", "resize.pt", "oversized_attribute.pt", "infinite_loop.pt"};
    for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++) {
        char name[64];
        size_t len;
        snprintf(name, sizeof name, "../attack/%s", pass[i]);
        unsigned char *b = load(name, &len);
        if (check(b, len) != 0) fail_msg("%s: %s", pass[i], msg);
        free(b);
    }
}

/* tscode_check on s, and the same fed a byte at a time (then a newline, as tsarchive ends a file) */
static int code(const char *s)
{
    char m2[256];
    int rc = tscode_check((const unsigned char *)s, strlen(s), msg, sizeof msg);
    tscode_scan sc;
    tscode_init(&sc);
    int rc2 = 0;
    for (size_t i = 0; s[i] && rc2 == 0; i++)
        rc2 = tscode_feed(&sc, (const unsigned char *)s + i, 1);
    if (rc2 == 0) rc2 = tscode_feed(&sc, (const unsigned char *)"\n", 1);
    assert_int_equal(rc, rc2);
    if (rc2) {
        tscode_describe(&sc, m2, sizeof m2);
        assert_string_equal(msg, m2);
    }
    return rc;
}

/* head, n copies of open, x, n copies of close: malloc'd */
static char *nest(const char *head, int n, const char *open, const char *close)
{
    size_t lo = strlen(open), lc = strlen(close), lh = strlen(head);
    char *s = malloc(lh + (size_t)n * (lo + lc) + 2);
    assert_non_null(s);
    char *p = s;
    memcpy(p, head, lh), p += lh;
    for (int i = 0; i < n; i++)
        memcpy(p, open, lo), p += lo;
    *p++ = 'x';
    for (int i = 0; i < n; i++)
        memcpy(p, close, lc), p += lc;
    *p = '\0';
    return s;
}

static void test_code_bound(void **state)
{
    (void)state;
    /* what torch writes */
    assert_int_equal(code("class Model(Module):\n  __parameters__ = [\"w\", ]\n  w : Tensor\n"
                          "  def forward(self: __torch__.Model,\n    x: Tensor) -> Tensor:\n"
                          "    if bool(torch.gt(x, 0)):\n      y = torch.add(x, (self.w)[0])\n    else:\n      y = x\n"
                          "    return y\n"),
                     0);
    /* __setstate__ defined: refused with the line; named but not defined, or in a string or comment: fine */
    assert_int_equal(code("class M(Module):\n  def __setstate__(self, s):\n    pass\n"), -1);
    assert_string_equal(msg, "defines __setstate__, which torch::jit::load runs (line 2)");
    assert_int_equal(code("def\t  __setstate__(self):"), -1);
    assert_int_equal(code("def \\\n  __setstate__(self):"), -1);
    assert_int_equal(code("  def __setstate__"), -1); /* at the end of the file */
    assert_int_equal(code("y = self.__setstate__\ndef f(): pass\n"), 0);
    assert_int_equal(code("s = \"def __setstate__(self)\"\n# def __setstate__(self):\n"), 0);
    assert_int_equal(code("s = '''\ndef __setstate__(self):\n'''\n"), 0);
    assert_int_equal(code("s = 'it''s' + \"\"\ndef __setstate__(self):\n"), -1); /* '' and "" are empty strings */
    assert_int_equal(code("def __setstate__x(self):\ndef x__setstate__(self):\n"), 0);
    assert_int_equal(code("def\n__setstate__ = 1\n"), 0); /* not one statement */

    /* brackets: 200 deep is fine, 201 is not, whatever the kind; brackets in strings count nothing */
    char *s = nest("y = ", 200, "(", ")");
    assert_int_equal(code(s), 0);
    free(s);
    s = nest("y = ", 201, "[", "]");
    assert_int_equal(code(s), -1);
    assert_string_equal(msg, "brackets nest more than 200 deep (line 1)");
    free(s);
    s = nest("y = ", 101, "({", "})");
    assert_int_equal(code(s), -1);
    free(s);
    s = nest("y = \"))))))\" + ", 201, "(", ")"); /* closing brackets in a string do not lower the count */
    assert_int_equal(code(s), -1);
    free(s);
    s = nest("y = ", 300, "\"(\" + ", "");
    assert_int_equal(code(s), 0);
    free(s);

    /* indentation: 200 open blocks are fine, 201 are not */
    char *t = malloc(400 * 410);
    assert_non_null(t);
    for (int levels = 200; levels <= 201; levels++) {
        char *p = t;
        for (int k = 0; k < levels; k++) {
            memset(p, ' ', (size_t)k), p += k;
            p += sprintf(p, "if x:\n");
        }
        memset(p, ' ', (size_t)levels), p += levels;
        strcpy(p, "y = 1\n");
        assert_int_equal(code(t), levels == 200 ? 0 : -1);
    }
    assert_string_equal(msg, "indentation nests more than 200 blocks deep (line 202)");
    /* lines inside brackets, blank and comment lines do not count; dedents close levels */
    char *p = t;
    p += sprintf(p, "y = f(\n");
    for (int k = 1; k < 300; k++) {
        memset(p, ' ', (size_t)k), p += k;
        p += sprintf(p, "%d,\n\n%*s# c\n", k, k + 1, "");
    }
    strcpy(p, ")\n");
    assert_int_equal(code(t), 0);
    p = t;
    for (int k = 0; k < 300; k++)
        p += sprintf(p, "if x:\n  y = 1\n");
    assert_int_equal(code(t), 0);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_edits),
        cmocka_unit_test(test_attack_archives),
        cmocka_unit_test(test_code_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
