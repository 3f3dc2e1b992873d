/* utf8_trim / utf8_copy: text cut to a buffer stays valid UTF-8 (jansson refuses it otherwise);
 * utf8_has_control / utf8_escape_control: control characters found, and escaped for terminals. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/msg.h"
#include "common/utf8.h"

static void test_trim(void **state)
{
    (void)state;
    char a[] = "abc";
    assert_string_equal(utf8_trim(a), "abc");
    char b[] = "caf\xc3\xa9"; /* complete é */
    assert_string_equal(utf8_trim(b), "caf\xc3\xa9");
    char c[] = "caf\xc3"; /* cut é */
    assert_string_equal(utf8_trim(c), "caf");
    char d[] = "x\xe2\x82"; /* cut € (3 bytes) */
    assert_string_equal(utf8_trim(d), "x");
    char e[] = "x\xe2\x82\xac"; /* whole € */
    assert_string_equal(utf8_trim(e), "x\xe2\x82\xac");
    char f[] = "\xf0\x9f\x98"; /* cut emoji */
    assert_string_equal(utf8_trim(f), "");
    char g[] = "";
    assert_string_equal(utf8_trim(g), "");
}

static void test_copy_cuts_whole_characters(void **state)
{
    (void)state;
    char out[8];
    utf8_copy(out, sizeof(out), "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac"); /* three € do not fit in 7 bytes */
    assert_string_equal(out, "\xe2\x82\xac\xe2\x82\xac");
    json_t *j = json_string(out);
    assert_non_null(j); /* jansson accepts it */
    json_decref(j);
}

/* regression (found by fuzzing): a reason cut inside a character made the event unencodable,
 * so a worker's "failed" event was dropped and the job stayed running */
static void test_event_with_cut_reason_encodes(void **state)
{
    (void)state;
    event_msg e;
    msg_event_init(&e, "j_1", "worker:w");
    snprintf(e.state, sizeof(e.state), "failed");
    memset(e.reason, 0, sizeof(e.reason));
    size_t n = 0;
    while (n + 3 < sizeof(e.reason)) {
        memcpy(e.reason + n, "\xe2\x82\xac", 3);
        n += 3;
    }
    e.reason[sizeof(e.reason) - 2] = '\0'; /* cut the last € */
    char *s = msg_event_encode(&e);
    assert_non_null(s);
    event_msg back;
    assert_int_equal(msg_event_decode(s, &back), 0);
    assert_string_equal(back.state, "failed");
    msg_event_clear(&back);
    free(s);
}

static void test_has_control(void **state)
{
    (void)state;
    assert_false(utf8_has_control(""));
    assert_false(utf8_has_control(NULL));
    assert_false(utf8_has_control("resnet-50 run #3 (caf\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80) ~!"));
    assert_false(utf8_has_control("\xc2\xa0\xc2\xbf\xc3\x80")); /* U+00A0, U+00BF, U+00C0: printable */
    assert_true(utf8_has_control("x\x1b]0;pwned\x07"));         /* ESC, BEL */
    assert_true(utf8_has_control("a\r\nb"));
    assert_true(utf8_has_control("tab\there"));
    assert_true(utf8_has_control("\x01"));
    assert_true(utf8_has_control("\x1f"));
    assert_true(utf8_has_control("del\x7f"));
    assert_true(utf8_has_control("csi\xc2\x9b"
                                 "31m"));      /* U+009B, the 8-bit CSI */
    assert_true(utf8_has_control("\xc2\x80")); /* U+0080, the first C1 */
    assert_true(utf8_has_control("\xc2\x9f")); /* U+009F, the last */
    assert_false(utf8_has_control("\xc2"));    /* a cut lead byte is no control */
}

static void expect_escaped(const char *in, const char *want)
{
    char *out = utf8_escape_control(in);
    assert_non_null(out);
    assert_string_equal(out, want);
    assert_false(utf8_has_control(out));
    free(out);
}

static void test_escape_control(void **state)
{
    (void)state;
    expect_escaped("", "");
    expect_escaped(NULL, "");
    expect_escaped("plain caf\xc3\xa9 \\x1b stays", "plain caf\xc3\xa9 \\x1b stays");
    expect_escaped("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07");
    expect_escaped("a\r\nb\tc", "a\\r\\nb\\tc");
    expect_escaped("\x7f\x01\x1f", "\\x7f\\x01\\x1f");
    expect_escaped("\xc2\x9b"
                   "2J\xc2\x80\xc2\x9f\xc2\xa0",
                   "\\u009b2J\\u0080\\u009f\xc2\xa0");
    /* the worst case: every byte a C0 control grows to four */
    char many[65];
    memset(many, 0x1b, 64);
    many[64] = '\0';
    char *out = utf8_escape_control(many);
    assert_non_null(out);
    assert_int_equal(strlen(out), 64 * 4);
    free(out);
}

/* a line of a program's output: a tab stays, every other control character is escaped */
static void test_escape_line(void **state)
{
    (void)state;
    char *out = utf8_escape_line("a\tb\x1b[2J\r\xc2\x9b caf\xc3\xa9");
    assert_string_equal(out, "a\tb\\x1b[2J\\r\\u009b caf\xc3\xa9");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_copy_cuts_whole_characters),
        cmocka_unit_test(test_event_with_cut_reason_encodes),
        cmocka_unit_test(test_has_control),
        cmocka_unit_test(test_escape_control),
        cmocka_unit_test(test_escape_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
