/* test_infer_frame.c - the direct inference path's frame heads (wire/infer_frame.h): what one side
 * encodes the other decodes, byte for byte as the header documents; heads that are not frames refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "wire/infer_frame.h"

static void test_round_trip(void **state)
{
    (void)state;
    unsigned char b[IF_HEAD];
    if_head in = {.kind = IF_REQUEST, .arg = 13, .id = 0x0102030405060708ULL, .len = 4096}, out;
    if_head_encode(b, &in);
    const unsigned char want[IF_HEAD] = {'G', 'F', '1', 'Q', 13, 0, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1, 0, 16, 0, 0, 0, 0, 0, 0};
    assert_memory_equal(b, want, IF_HEAD); /* little-endian, as the header says */
    assert_int_equal(if_head_decode(b, &out), 0);
    assert_int_equal(out.kind, IF_REQUEST);
    assert_int_equal(out.arg, 13);
    assert_true(out.id == in.id);
    assert_int_equal(out.len, 4096);
    if_head_encode(b, &(if_head){.kind = IF_REPLY, .arg = 504, .id = UINT64_MAX, .len = 0});
    assert_int_equal(if_head_decode(b, &out), 0);
    assert_int_equal(out.kind, IF_REPLY);
    assert_int_equal(out.arg, 504);
    assert_true(out.id == UINT64_MAX);
    if_head_encode(b, &(if_head){.kind = IF_HELLO, .len = 50});
    assert_int_equal(if_head_decode(b, &out), 0);
    assert_int_equal(out.kind, IF_HELLO);
    assert_int_equal(out.len, 50);
}

static void test_refused(void **state)
{
    (void)state;
    unsigned char b[IF_HEAD];
    if_head h;
    if_head_encode(b, &(if_head){.kind = IF_REQUEST, .arg = 2, .len = 1}); /* more JSON than body */
    assert_int_equal(if_head_decode(b, &h), -1);
    if_head_encode(b, &(if_head){.kind = IF_REPLY, .arg = 99}); /* not a status */
    assert_int_equal(if_head_decode(b, &h), -1);
    if_head_encode(b, &(if_head){.kind = IF_REPLY, .arg = 600});
    assert_int_equal(if_head_decode(b, &h), -1);
    if_head_encode(b, &(if_head){.kind = IF_REQUEST, .len = IF_MAX_BODY + 1}); /* too large */
    assert_int_equal(if_head_decode(b, &h), -1);
    if_head_encode(b, &(if_head){.kind = IF_REQUEST, .len = IF_MAX_BODY});
    assert_int_equal(if_head_decode(b, &h), 0);
    if_head_encode(b, &(if_head){.kind = IF_HELLO});
    b[3] = 'X'; /* an unknown kind */
    assert_int_equal(if_head_decode(b, &h), -1);
    if_head_encode(b, &(if_head){.kind = IF_HELLO});
    b[0] = 'H'; /* "HTTP": someone speaking the wrong protocol */
    assert_int_equal(if_head_decode(b, &h), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_round_trip), cmocka_unit_test(test_refused)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
