/* test_infer_wire.c - the inference request and reply lines (wire/infer_wire.h): what the server
 * writes the worker reads, and back; malformed lines refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "wire/infer_wire.h"

static void test_request_round_trip(void **state)
{
    (void)state;
    char head[IW_HEAD_MAX], line[512];
    const char body[] = "{\"inputs\":[]}\x01\x02\x03";
    int hl = iw_request_head(head, sizeof(head), 18446744073709551615ULL, "gantry:infer:replies:srv-1", 13);
    assert_true(hl > 0);
    assert_string_equal(head, "18446744073709551615 gantry:infer:replies:srv-1 13 ");
    memcpy(line, head, (size_t)hl);
    memcpy(line + hl, body, sizeof(body) - 1);
    iw_request r;
    assert_int_equal(iw_request_parse(line, (size_t)hl + sizeof(body) - 1, &r), 0);
    assert_string_equal(r.id, "18446744073709551615");
    assert_string_equal(r.reply_to, "gantry:infer:replies:srv-1");
    assert_int_equal(r.len, sizeof(body) - 1);
    assert_int_equal(r.json_len, 13);
    assert_memory_equal(r.body, body, sizeof(body) - 1);
    assert_int_equal(iw_request_head(head, sizeof(head), 1, "has space", 0), -1);
    assert_int_equal(iw_request_head(head, sizeof(head), 1, "", 0), -1);
}

static void test_request_refused(void **state)
{
    (void)state;
    const char *bad[] = {"",           "1",         "1 s",       "1 s 3",       "1 s 99 short",
                         "1 s x body", " s 0 body", "1  0 body", "1 s -1 body", "1 s 99999999999999999999999 body",
                         "x s 0 body"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char buf[64];
        strcpy(buf, bad[i]);
        iw_request r;
        assert_int_equal(iw_request_parse(buf, strlen(buf), &r), -1);
        assert_string_equal(buf, bad[i]); /* a refused line is left as it was */
    }
    char ok[] = "7 s 0 ";
    iw_request r;
    assert_int_equal(iw_request_parse(ok, 6, &r), 0); /* an empty body */
    assert_int_equal(r.len, 0);
    /* a stream name longer than any head carries (the fuzzer's find: it parsed, and could not be written again) */
    char longer[IW_REPLY_TO_MAX + 16], head[IW_HEAD_MAX];
    memset(longer, 'r', sizeof longer);
    memcpy(longer, "1 ", 2);
    memcpy(longer + 2 + IW_REPLY_TO_MAX + 1, " 0 ", 3);
    assert_int_equal(iw_request_parse(longer, 2 + IW_REPLY_TO_MAX + 4, &r), -1);
    longer[2 + IW_REPLY_TO_MAX] = ' '; /* IW_REPLY_TO_MAX of them: parsed, and written again */
    memcpy(longer + 2 + IW_REPLY_TO_MAX + 1, "0 ", 2);
    assert_int_equal(iw_request_parse(longer, 2 + IW_REPLY_TO_MAX + 3, &r), 0);
    assert_true(iw_request_head(head, sizeof head, 1, r.reply_to, 0) > 0);
}

static void test_reply(void **state)
{
    (void)state;
    char head[64];
    int hl = iw_reply_head(head, sizeof(head), "42", 504);
    assert_string_equal(head, "42 504 ");
    assert_int_equal(hl, 7);
    const char line[] = "42 200 {\"a\":1}";
    uint64_t id;
    int status;
    const char *body;
    size_t blen;
    assert_int_equal(iw_reply_parse(line, sizeof(line) - 1, &id, &status, &body, &blen), 0);
    assert_int_equal(id, 42);
    assert_int_equal(status, 200);
    assert_int_equal(blen, 7);
    assert_memory_equal(body, "{\"a\":1}", 7);
    const char *bad[] = {"42", "42 200", "x 200 b", "42 99 b", "42 600 b", "42 2OO b", " 200 b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(iw_reply_parse(bad[i], strlen(bad[i]), &id, &status, &body, &blen), -1);
    assert_int_equal(iw_reply_head(head, sizeof(head), "a b", 200), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_round_trip),
        cmocka_unit_test(test_request_refused),
        cmocka_unit_test(test_reply),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
