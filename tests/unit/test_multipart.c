/* test_multipart.c - multipart/form-data bodies (server/multipart.c): what curl 7.88 and Python
 * requests send (bytes captured from both), quoted boundaries, transport padding, the boundary text
 * inside data, empty parts, binary data with NULs, and every refusal's message. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/multipart.h"

#define BODY(s) (s), sizeof(s) - 1

static mp_part parts[MP_MAX_PARTS];
static int nparts;
static char msg[256];

static int parse(const char *ct, const char *body, size_t len)
{
    msg[0] = '\0';
    /* a heap copy of exactly len bytes: ASan catches any read past it */
    char *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, body, len);
    int rc = multipart_parse(ct, copy, len, parts, MP_MAX_PARTS, &nparts, msg, sizeof(msg));
    if (rc == 0) /* the views point into the copy: move them to the caller's body before freeing it */
        for (int i = 0; i < nparts; i++)
            parts[i].data = body + (parts[i].data - copy);
    else
        assert_int_equal(nparts, 0);
    free(copy);
    return rc;
}

static void refused(const char *ct, const char *body, size_t len, const char *expect)
{
    assert_int_equal(parse(ct, body, len), -1);
    if (!strstr(msg, expect)) fail_msg("message '%s' lacks '%s'", msg, expect);
}

static void test_curl(void **state)
{
    (void)state;
    static const char body[] = "--------------------------30c8aa75653a0bb5\r\n"
                               "Content-Disposition: form-data; name=\"file\"; filename=\"m.pt\"\r\n"
                               "Content-Type: application/octet-stream\r\n"
                               "\r\n"
                               "AB\0C\r\n"
                               "--------------------------30c8aa75653a0bb5\r\n"
                               "Content-Disposition: form-data; name=\"metadata\"\r\n"
                               "Content-Type: application/json\r\n"
                               "\r\n"
                               "{\"a\":1}\r\n"
                               "--------------------------30c8aa75653a0bb5\r\n"
                               "Content-Disposition: form-data; name=\"x\"; filename=\"a%22b.pt\"\r\n"
                               "\r\n"
                               "1\r\n"
                               "--------------------------30c8aa75653a0bb5--\r\n";
    assert_int_equal(parse("multipart/form-data; boundary=------------------------30c8aa75653a0bb5", BODY(body)), 0);
    assert_int_equal(nparts, 3);
    assert_string_equal(parts[0].name, "file");
    assert_string_equal(parts[0].filename, "m.pt");
    assert_true(parts[0].has_filename);
    assert_string_equal(parts[0].content_type, "application/octet-stream");
    assert_int_equal(parts[0].len, 4);
    assert_memory_equal(parts[0].data, "AB\0C", 4);
    assert_string_equal(parts[1].name, "metadata");
    assert_false(parts[1].has_filename);
    assert_string_equal(parts[1].filename, "");
    assert_string_equal(parts[1].content_type, "application/json");
    assert_int_equal(parts[1].len, 7);
    assert_memory_equal(parts[1].data, "{\"a\":1}", 7);
    assert_string_equal(parts[2].filename, "a%22b.pt");
    assert_ptr_equal(multipart_find(parts, nparts, "metadata"), &parts[1]);
    assert_null(multipart_find(parts, nparts, "missing"));
}

static void test_requests(void **state)
{
    (void)state;
    static const char body[] = "--f3aa91fd23a94ea7a29f18c9f8493301\r\n"
                               "Content-Disposition: form-data; name=\"metadata\"\r\n\r\n"
                               "{\"a\":1}\r\n"
                               "--f3aa91fd23a94ea7a29f18c9f8493301\r\n"
                               "Content-Disposition: form-data; name=\"file\"; filename=\"model.pt\"\r\n"
                               "Content-Type: application/octet-stream\r\n\r\n"
                               "AB\0C\r\n"
                               "--f3aa91fd23a94ea7a29f18c9f8493301--\r\n";
    assert_int_equal(parse("multipart/form-data; boundary=f3aa91fd23a94ea7a29f18c9f8493301", BODY(body)), 0);
    assert_int_equal(nparts, 2);
    assert_string_equal(parts[0].name, "metadata");
    assert_string_equal(parts[0].content_type, "");
    assert_string_equal(parts[1].name, "file");
    assert_int_equal(parts[1].len, 4);
    assert_memory_equal(parts[1].data, "AB\0C", 4);
}

static void test_quoting_and_padding(void **state)
{
    (void)state;
    /* quoted boundary with a space and characters a token may not hold, other case, preamble,
     * transport padding, escaped quote in the filename, epilogue */
    static const char body[] = "This is the preamble.\r\n"
                               "--a b:c=d \t\r\n"
                               "content-disposition: FORM-DATA ; name=\"f\" ; filename=\"x\\\"y\\\\z.pt\"\r\n"
                               "\r\n"
                               "data\r\n"
                               "--a b:c=d--\r\nepilogue, ignored: --a b:c=d\r\n";
    assert_int_equal(parse("Multipart/Form-Data ; charset=utf-8; BOUNDARY=\"a b:c=d\"", BODY(body)), 0);
    assert_int_equal(nparts, 1);
    assert_string_equal(parts[0].name, "f");
    assert_string_equal(parts[0].filename, "x\"y\\z.pt");
    assert_int_equal(parts[0].len, 4);
    /* a token name, unquoted */
    static const char b2[] = "--b\r\nContent-Disposition: form-data; name=meta\r\n\r\nv\r\n--b--";
    assert_int_equal(parse("multipart/form-data; boundary=b", BODY(b2)), 0);
    assert_string_equal(parts[0].name, "meta");
    /* UTF-8 filename */
    static const char b3[] =
        "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"mod\xc3\xa8le.pt\"\r\n\r\nv\r\n--b--";
    assert_int_equal(parse("multipart/form-data; boundary=b", BODY(b3)), 0);
    assert_string_equal(parts[0].filename, "mod\xc3\xa8le.pt");
}

static void test_boundary_in_data(void **state)
{
    (void)state;
    /* the boundary text without the leading CRLF--, with CRLF-- but a longer boundary after it,
     * and an empty part */
    static const char body[] = "--XyZ\r\n"
                               "Content-Disposition: form-data; name=\"a\"\r\n\r\n"
                               "--XyZ inside, XyZ\r\n--XyZw\r\n-XyZ\r\n"
                               "--XyZ\r\n"
                               "Content-Disposition: form-data; name=\"empty\"; filename=\"\"\r\n\r\n"
                               "\r\n"
                               "--XyZ--";
    assert_int_equal(parse("multipart/form-data; boundary=XyZ", BODY(body)), 0);
    assert_int_equal(nparts, 2);
    static const char a[] = "--XyZ inside, XyZ\r\n--XyZw\r\n-XyZ";
    assert_int_equal(parts[0].len, sizeof(a) - 1);
    assert_memory_equal(parts[0].data, a, sizeof(a) - 1);
    assert_string_equal(parts[1].name, "empty");
    assert_true(parts[1].has_filename);
    assert_string_equal(parts[1].filename, "");
    assert_int_equal(parts[1].len, 0);
    /* no parts at all */
    assert_int_equal(parse("multipart/form-data; boundary=XyZ", BODY("--XyZ--\r\n")), 0);
    assert_int_equal(nparts, 0);
}

static void test_binary(void **state)
{
    (void)state;
    char body[600];
    size_t n = (size_t)snprintf(body, sizeof(body), "--q\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n");
    for (int i = 0; i < 256; i++)
        body[n + (size_t)i] = (char)i;
    memcpy(body + n + 256, "\r\n--q--\r\n", 9);
    assert_int_equal(parse("multipart/form-data; boundary=q", body, n + 256 + 9), 0);
    assert_int_equal(parts[0].len, 256);
    for (int i = 0; i < 256; i++)
        assert_int_equal((unsigned char)parts[0].data[i], i);
}

static void test_content_type_refused(void **state)
{
    (void)state;
    const char *b = "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--b--";
    size_t n = strlen(b);
    const char *want = "Content-Type: expected multipart/form-data with a boundary parameter";
    refused(NULL, b, n, want);
    refused("application/json", b, n, "not 'application/json'");
    refused("multipart/form-data", b, n, want);
    refused("multipart/mixed; boundary=b", b, n, want);
    refused("multipart/form-data; boundary=", b, n, "a parameter with an empty value");
    refused("multipart/form-data; boundary=\"\"", b, n, "the boundary must be 1 to 70 characters");
    refused("multipart/form-data; boundary=\"ab \"", b, n, "the boundary must be 1 to 70 characters");
    refused("multipart/form-data; boundary=a*b", b, n, "the boundary must be 1 to 70 characters");
    refused("multipart/form-data; boundary=\"unclosed", b, n, "closing '\"'");
    refused("multipart/form-data; boundary=b; boundary=c", b, n, "the boundary parameter appears twice");
    char ct[200];
    snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%071d", 0);
    refused(ct, b, n, "the boundary must be 1 to 70 characters");
    snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%070d", 0);
    refused(ct, b, n, "the body has no --0000"); /* 70 is fine, the body does not use it */
}

static void test_body_refused(void **state)
{
    (void)state;
    const char *ct = "multipart/form-data; boundary=XYZ";
    refused(ct, BODY(""), "the body has no --XYZ line");
    refused(ct, BODY("--XYZ"), "the body ends before the closing boundary --XYZ--");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\ndata"),
            "the body ends before the closing boundary --XYZ-- (in part 1 ('file'))");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\ndata\r\n--XYZ"),
            "the body ends before the closing boundary --XYZ-- (after part 1 ('file'))");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; name=\"file\"\r\n"), "the body ends inside the headers of part 1");
    refused(ct,
            BODY("--XYZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--XYZ\r\nContent-Type: "
                 "text/plain\r\n\r\n2\r\n--XYZ--"),
            "part 2: no Content-Disposition: form-data; name=");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; filename=\"a\"\r\n\r\n1\r\n--XYZ--"),
            "part 1: no Content-Disposition: form-data; name=");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\n1\r\n--XYZ--"),
            "part 1: Content-Disposition must be form-data");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; name=\"\"\r\n\r\n1\r\n--XYZ--"), "part 1: the name must be 1 to 64");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; name=\"a\x01\"\r\n\r\n1\r\n--XYZ--"), "part 1: the name must be");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; name=\"a\xff\"\r\n\r\n1\r\n--XYZ--"), "part 1: the name must be");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; name=\"a\"; filename=\"\x1b[2J\"\r\n\r\n1\r\n--XYZ--"),
            "part 1 ('a'): the filename must be");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; name=\"a\"; name=\"b\"\r\n\r\n1\r\n--XYZ--"),
            "the name parameter appears twice");
    refused(ct,
            BODY("--XYZ\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Disposition: form-data; "
                 "name=\"a\"\r\n\r\n1\r\n--XYZ--"),
            "Content-Disposition appears twice");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data;\r\n name=\"a\"\r\n\r\n1\r\n--XYZ--"), "folded header lines");
    refused(ct, BODY("--XYZ\r\nContent-Disposition form-data\r\n\r\n1\r\n--XYZ--"), "a header line without ':'");
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; name=\"a\"\r\nContent-Type: a\x01\r\n\r\n1\r\n--XYZ--"),
            "Content-Type must be printable ASCII");
    refused(ct,
            BODY("--XYZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n1\r\n"
                 "--XYZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n2\r\n--XYZ--"),
            "part 'file' appears twice");
    /* LF-only line endings: refused with a message saying so, wherever they show */
    const char *lf = "line endings must be CRLF";
    refused(ct, BODY("--XYZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XYZ--\n"), lf);
    refused(ct, BODY("preamble\n--XYZ\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XYZ--\n"), lf);
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; name=\"a\"\n\n1\n--XYZ--\n"), lf);
    refused(ct, BODY("--XYZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--XYZ\nContent-Dis"), lf);
}

static void test_limits(void **state)
{
    (void)state;
    const char *ct = "multipart/form-data; boundary=b";
    /* more parts than max_parts */
    char body[4096];
    size_t n = 0;
    for (int i = 0; i <= MP_MAX_PARTS; i++)
        n +=
            (size_t)snprintf(body + n, sizeof(body) - n, "--b\r\nContent-Disposition: form-data; name=\"p%d\"\r\n\r\n%d\r\n", i, i);
    n += (size_t)snprintf(body + n, sizeof(body) - n, "--b--\r\n");
    refused(ct, body, n, "more than 16 parts");
    mp_part two[2];
    int np;
    assert_int_equal(multipart_parse(ct, body, n, two, 2, &np, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "more than 2 parts");
    /* header lines: 8 KiB at most */
    char *big = malloc(MP_MAX_HEADER_BYTES + 200);
    assert_non_null(big);
    for (int extra = 0; extra < 2; extra++) {
        size_t k = (size_t)sprintf(big, "--b\r\nContent-Disposition: form-data; name=\"a\"\r\nX-Pad: ");
        size_t pad = MP_MAX_HEADER_BYTES - (k - 5) - 2 + (size_t)extra; /* the headers: 8192 bytes, then 8193 */
        memset(big + k, 'x', pad);
        k += pad;
        k += (size_t)sprintf(big + k, "\r\n\r\nv\r\n--b--");
        if (extra)
            refused(ct, big, k, "part 1: header lines longer than 8192 bytes");
        else
            assert_int_equal(parse(ct, big, k), 0);
    }
    free(big);
    /* a 64-byte name is fine, 65 is not; a filename of 255, not 256 */
    char name[70], fname[260], b[700];
    memset(name, 'n', 65), name[65] = '\0';
    memset(fname, 'f', 256), fname[256] = '\0';
    n = (size_t)snprintf(
        b, sizeof(b), "--b\r\nContent-Disposition: form-data; name=\"%.64s\"; filename=\"%.255s\"\r\n\r\n\r\n--b--", name, fname);
    assert_int_equal(parse(ct, b, n), 0);
    assert_int_equal(strlen(parts[0].name), 64);
    assert_int_equal(strlen(parts[0].filename), 255);
    n = (size_t)snprintf(b, sizeof(b), "--b\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n\r\n--b--", name);
    refused(ct, b, n, "the name must be 1 to 64 bytes");
    n = (size_t)snprintf(b, sizeof(b), "--b\r\nContent-Disposition: form-data; name=\"a\"; filename=\"%s\"\r\n\r\n\r\n--b--",
                         fname);
    refused(ct, b, n, "the filename must be at most 255 bytes");
    /* a message cut to a small buffer stays a string */
    char small[8];
    assert_int_equal(multipart_parse(NULL, "", 0, parts, 1, &np, small, sizeof(small)), -1);
    assert_int_equal(strlen(small), 7);
    assert_int_equal(multipart_parse(NULL, "", 0, parts, 1, &np, NULL, 0), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_curl),
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_quoting_and_padding),
        cmocka_unit_test(test_boundary_in_data),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_content_type_refused),
        cmocka_unit_test(test_body_refused),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
