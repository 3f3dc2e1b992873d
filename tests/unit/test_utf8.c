/* utf8_trim / utf8_copy: text cut to a buffer stays valid UTF-8 (jansson refuses it otherwise). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/msg.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trim),
        cmocka_unit_test(test_copy_cuts_whole_characters),
        cmocka_unit_test(test_event_with_cut_reason_encodes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
