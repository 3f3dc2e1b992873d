/* logs_line_text (server/logs.h): a line of a program's output as the API shows it: valid UTF-8,
 * no byte that drives a terminal (ESC, CSI, CR, NUL), tabs kept, a CR-rewritten line as a terminal
 * shows it.  The routes themselves: tests/integration/test_program_logs.py. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "server/logs.h"

static void expect_line(const char *in, size_t n, const char *want)
{
    char *out = logs_line_text(in, n);
    assert_string_equal(out, want);
    free(out);
}

#define LINE(lit, want) expect_line(lit, sizeof(lit) - 1, want)

static void test_plain_and_tabs(void **state)
{
    (void)state;
    LINE("", "");
    LINE("epoch 1 loss=0.45", "epoch 1 loss=0.45");
    LINE("a\tb\tc", "a\tb\tc");
    LINE("caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93");
}

static void test_terminal_bytes_escaped(void **state)
{
    (void)state;
    LINE("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m");
    LINE("\x1b]0;title\x07", "\\x1b]0;title\\x07");
    LINE("\xc2\x9b"
         "2J",
         "\\u009b2J");
    LINE("del\x7f", "del\\x7f");
}

static void test_invalid_utf8_and_nul(void **state)
{
    (void)state;
    LINE("bad \xff\xfe end", "bad ?? end");
    LINE("cut \xe2\x9c", "cut ??");
    LINE("nul\0after", "nul?after"); /* the bytes after a NUL are kept */
}

static void test_carriage_returns(void **state)
{
    (void)state;
    LINE("crlf\r", "crlf");
    LINE("10%\r50%\r100%", "100%");
    LINE("10%\r50%\r100%\r", "100%");
    LINE("\r", "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_and_tabs),
        cmocka_unit_test(test_terminal_bytes_escaped),
        cmocka_unit_test(test_invalid_utf8_and_nul),
        cmocka_unit_test(test_carriage_returns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
