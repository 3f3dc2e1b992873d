/* test_tsarchive.c - is an upload TorchScript (server/tsarchive.c)?  On the archives torch 1.13
 * wrote (tests/data/torchscript/archives/, made by make_archives.py there): a scripted module is
 * accepted; torch.save of a state_dict or a whole module, a truncated copy, a flipped byte and a
 * text file are refused with their messages.  Then edits of the scripted archive in memory: every
 * prefix of it, a damaged deflated entry, a ZIP64 record moved, a second top-level folder. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/tsarchive.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_edits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
