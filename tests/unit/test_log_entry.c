/* test_log_entry.c - a program job's log stream entries (wire/log_entry.h): what the worker encodes the
 * server decodes, bytes kept as written; entries not of the format refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "wire/log_entry.h"

static void test_chunk_round_trip(void **state)
{
    (void)state;
    const char chunk[] = "epoch 1\r\nloss \x00\xff 0.5\n";
    log_entry e = {.rank = 3, .gen = 12, .text = chunk, .text_len = sizeof(chunk) - 1}, d;
    log_entry_nums nums;
    const char *argv[LOG_ENTRY_ARGC];
    size_t lens[LOG_ENTRY_ARGC];
    assert_int_equal(log_entry_encode(&e, &nums, argv, lens), 0);
    assert_string_equal(argv[0], "r");
    assert_string_equal(argv[1], "3");
    assert_string_equal(argv[2], "g");
    assert_string_equal(argv[3], "12");
    assert_string_equal(argv[4], "t");
    assert_int_equal(lens[5], sizeof(chunk) - 1);
    assert_int_equal(log_entry_decode(LOG_ENTRY_ARGC, argv, lens, &d), 0);
    assert_int_equal(d.rank, 3);
    assert_int_equal(d.gen, 12);
    assert_null(d.end);
    assert_int_equal(d.text_len, sizeof(chunk) - 1);
    assert_memory_equal(d.text, chunk, sizeof(chunk) - 1);
}

static void test_end_round_trip(void **state)
{
    (void)state;
    const char *reason = "killed by signal 9";
    log_entry e = {.rank = 0, .gen = 0, .end = reason, .end_len = strlen(reason)}, d;
    log_entry_nums nums;
    const char *argv[LOG_ENTRY_ARGC];
    size_t lens[LOG_ENTRY_ARGC];
    assert_int_equal(log_entry_encode(&e, &nums, argv, lens), 0);
    assert_string_equal(argv[4], "end");
    assert_int_equal(log_entry_decode(LOG_ENTRY_ARGC, argv, lens, &d), 0);
    assert_int_equal(d.rank, 0);
    assert_int_equal(d.gen, 0);
    assert_null(d.text);
    assert_int_equal(d.end_len, strlen(reason));
    assert_memory_equal(d.end, reason, strlen(reason));
    /* an empty chunk is a chunk */
    log_entry empty = {.rank = 1, .gen = 2, .text = "", .text_len = 0};
    assert_int_equal(log_entry_encode(&empty, &nums, argv, lens), 0);
    assert_int_equal(log_entry_decode(LOG_ENTRY_ARGC, argv, lens, &d), 0);
    assert_non_null(d.text);
    assert_int_equal(d.text_len, 0);
}

static void test_encode_refused(void **state)
{
    (void)state;
    log_entry_nums nums;
    const char *argv[LOG_ENTRY_ARGC];
    size_t lens[LOG_ENTRY_ARGC];
    log_entry bad[] = {
        {.rank = -1, .gen = 0, .text = "x", .text_len = 1},
        {.rank = 0, .gen = -1, .text = "x", .text_len = 1},
        {.rank = LOG_ENTRY_NUM_MAX + 1L, .gen = 0, .text = "x", .text_len = 1},
        {.rank = 0, .gen = 0},                                                       /* neither */
        {.rank = 0, .gen = 0, .text = "x", .text_len = 1, .end = "y", .end_len = 1}, /* both */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(log_entry_encode(&bad[i], &nums, argv, lens), -1);
}

/* a NULL-terminated list of strings as the decoder's input */
static int decode(log_entry *d, const char *first, ...)
{
    const char *v[32];
    size_t lens[32], n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s && n < 32; s = va_arg(ap, const char *))
        v[n] = s, lens[n] = strlen(s), n++;
    va_end(ap);
    return log_entry_decode(n, v, lens, d);
}

static void test_decode_refused(void **state)
{
    (void)state;
    log_entry d;
    assert_int_equal(decode(&d, "r", "1", "g", "2", "t", "a\n", NULL), 0);
    assert_int_equal(decode(&d, "g", "2", "end", "x", "r", "1", "later", "field", NULL), 0); /* any order, unknown skipped */
    assert_int_equal(d.rank, 1);
    assert_int_equal(decode(&d, "r", "1", "t", "a", NULL), -1);                       /* no generation */
    assert_int_equal(decode(&d, "g", "1", "t", "a", NULL), -1);                       /* no rank */
    assert_int_equal(decode(&d, "r", "1", "g", "2", NULL), -1);                       /* neither t nor end */
    assert_int_equal(decode(&d, "r", "1", "g", "2", "t", "a", "end", "b", NULL), -1); /* both */
    assert_int_equal(decode(&d, "r", "1", "g", "2", "t", "a", "t", "b", NULL), -1);   /* twice */
    assert_int_equal(decode(&d, "r", "1", "r", "2", "g", "2", "t", "a", NULL), -1);   /* rank twice */
    assert_int_equal(decode(&d, "r", "-1", "g", "2", "t", "a", NULL), -1);            /* a sign */
    assert_int_equal(decode(&d, "r", "01", "g", "2", "t", "a", NULL), -1);            /* a leading zero */
    assert_int_equal(decode(&d, "r", "1x", "g", "2", "t", "a", NULL), -1);            /* not a number */
    assert_int_equal(decode(&d, "r", "", "g", "2", "t", "a", NULL), -1);              /* empty */
    assert_int_equal(decode(&d, "r", "1000000000", "g", "2", "t", "a", NULL), -1);    /* too large */
    assert_int_equal(decode(&d, "r", " 1", "g", "2", "t", "a", NULL), -1);            /* a space */
    assert_int_equal(decode(&d, "r", "1", "g", "2", "t", NULL), -1);                  /* odd */
    /* numbers are read within their length, not up to a NUL */
    const char *v[] = {"r", "12", "g", "3", "t", "x"};
    size_t lens[] = {1, 1, 1, 1, 1, 1};
    assert_int_equal(log_entry_decode(6, v, lens, &d), 0);
    assert_int_equal(d.rank, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunk_round_trip),
        cmocka_unit_test(test_end_round_trip),
        cmocka_unit_test(test_encode_refused),
        cmocka_unit_test(test_decode_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
