/* test_rdv_wire.c - a gang's rendezvous hash (wire/rdv_wire.h): the join's arguments and the field
 * names encoded, the hash decoded as HGETALL gives it; hashes not of the format refused.
 * (tests/unit/test_scripts.c decodes what rdv_join.lua and dispatch.lua write with the same decoder.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "wire/rdv_wire.h"

static void test_join_encode(void **state)
{
    (void)state;
    rdv_join_nums nums;
    const char *argv[RDV_JOIN_ARGC];
    assert_int_equal(rdv_join_encode(&(rdv_join_msg){4, "10.0.0.1:7000", "w_1", 86400000}, &nums, argv), 0);
    assert_string_equal(argv[0], "4");
    assert_string_equal(argv[1], "10.0.0.1:7000");
    assert_string_equal(argv[2], "w_1");
    assert_string_equal(argv[3], "86400000");
    char longaddr[RDV_ADDR_LEN + 1];
    memset(longaddr, 'a', RDV_ADDR_LEN);
    longaddr[RDV_ADDR_LEN] = '\0';
    assert_int_equal(rdv_join_encode(&(rdv_join_msg){0, "a:1", "w", 1}, &nums, argv), -1);
    assert_int_equal(rdv_join_encode(&(rdv_join_msg){RDV_MAX_WORLD + 1, "a:1", "w", 1}, &nums, argv), -1);
    assert_int_equal(rdv_join_encode(&(rdv_join_msg){2, "", "w", 1}, &nums, argv), -1);
    assert_int_equal(rdv_join_encode(&(rdv_join_msg){2, longaddr, "w", 1}, &nums, argv), -1);
    assert_int_equal(rdv_join_encode(&(rdv_join_msg){2, "a:1", "", 1}, &nums, argv), -1);
    assert_int_equal(rdv_join_encode(&(rdv_join_msg){2, "a:1", "w", 0}, &nums, argv), -1);
    char f[16];
    assert_int_equal(rdv_field_val(f, sizeof(f), "nccl_id"), 0);
    assert_string_equal(f, "val:nccl_id");
    assert_int_equal(rdv_field_val(f, sizeof(f), "a_much_longer_name"), -1);
}

static int decode(rdv_state *st, const char *first, ...)
{
    const char *v[64];
    size_t lens[64], n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s && n < 64; s = va_arg(ap, const char *))
        v[n] = s, lens[n] = strlen(s), n++;
    va_end(ap);
    return rdv_decode(n, v, lens, st);
}

static void test_decode(void **state)
{
    (void)state;
    rdv_state st;
    assert_int_equal(decode(&st, "world", "3", "n", "2", "addr:0", "10.0.0.1:7000", "worker:0", "w1", "addr:1", "10.0.0.2:7000",
                            "worker:1", "w2", "val:master_port", "29500", NULL),
                     0);
    assert_int_equal(st.world, 3);
    assert_int_equal(st.joined, 2);
    assert_int_equal(st.naddrs, 2);
    assert_true(st.have[0] && st.have[1] && !st.have[2]);
    assert_string_equal(st.addrs[1], "10.0.0.2:7000");
    assert_false(st.aborted);
    assert_int_equal(decode(&st, "addr:0", "h:1", "abort", "rank 1 failed: no GPU", NULL), 0);
    assert_true(st.aborted);
    assert_string_equal(st.abort, "rank 1 failed: no GPU");
    assert_int_equal(decode(&st, NULL), 0); /* an empty (expired) hash */
    assert_int_equal(st.world, 0);
    assert_int_equal(st.naddrs, 0);
    /* refused */
    assert_int_equal(decode(&st, "world", "x", NULL), -1);
    assert_int_equal(decode(&st, "n", "65", NULL), -1);
    assert_int_equal(decode(&st, "addr:64", "h:1", NULL), -1);
    assert_int_equal(decode(&st, "addr:-1", "h:1", NULL), -1);
    assert_int_equal(decode(&st, "addr:01", "h:1", NULL), -1);
    assert_int_equal(decode(&st, "addr:", "h:1", NULL), -1);
    assert_int_equal(decode(&st, "addr:0", "", NULL), -1);
    assert_int_equal(decode(&st, "addr:0", NULL), -1); /* odd */
    char longaddr[RDV_ADDR_LEN + 1];
    memset(longaddr, 'a', RDV_ADDR_LEN);
    longaddr[RDV_ADDR_LEN] = '\0';
    assert_int_equal(decode(&st, "addr:0", longaddr, NULL), -1);
    const char *v[] = {"addr:0", "h\0:1"};
    size_t lens[] = {6, 4};
    assert_int_equal(rdv_decode(2, v, lens, &st), -1); /* a NUL in an address */
    /* a long abort reason is cut, terminated */
    char reason[RDV_REASON_LEN * 2];
    memset(reason, 'r', sizeof(reason) - 1);
    reason[sizeof(reason) - 1] = '\0';
    assert_int_equal(decode(&st, "abort", reason, NULL), 0);
    assert_int_equal(strlen(st.abort), RDV_REASON_LEN - 1);
    assert_int_equal(rdv_number("42", 2), 42);
    assert_int_equal(rdv_number("42", 1), 4);
    assert_int_equal(rdv_number("", 0), -1);
    assert_int_equal(rdv_number("4a", 2), -1);
}

static void test_full_gang(void **state)
{
    (void)state;
    /* every member's addr: and worker: fields, world, n, abort and a few values fit the decoder */
    static char fields[RDV_MAX_FIELDS][32];
    const char *v[RDV_MAX_FIELDS];
    size_t lens[RDV_MAX_FIELDS], n = 0;
    for (int r = 0; r < RDV_MAX_WORLD; r++) {
        snprintf(fields[n], 32, "addr:%d", r), snprintf(fields[n + 1], 32, "10.0.0.%d:7000", r), n += 2;
        snprintf(fields[n], 32, "worker:%d", r), snprintf(fields[n + 1], 32, "w%d", r), n += 2;
    }
    snprintf(fields[n], 32, "world"), snprintf(fields[n + 1], 32, "%d", RDV_MAX_WORLD), n += 2;
    snprintf(fields[n], 32, "n"), snprintf(fields[n + 1], 32, "%d", RDV_MAX_WORLD), n += 2;
    for (int i = 0; i < 4; i++)
        snprintf(fields[n], 32, "val:v%d", i), snprintf(fields[n + 1], 32, "x"), n += 2;
    for (size_t i = 0; i < n; i++)
        v[i] = fields[i], lens[i] = strlen(fields[i]);
    rdv_state st;
    assert_int_equal(rdv_decode(n, v, lens, &st), 0);
    assert_int_equal(st.naddrs, RDV_MAX_WORLD);
    assert_string_equal(st.addrs[63], "10.0.0.63:7000");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join_encode),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_full_gang),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
