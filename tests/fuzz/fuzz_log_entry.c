/* fuzz_log_entry.c - a program job's log stream entries as the server reads them (wire/log_entry.h):
 * the input is an entry's field/value strings separated by 0x1f bytes (the unit separator; any other
 * byte, NUL and LF included, may be in a string, as in a Redis stream entry).
 *
 * Checks: a decoded entry has a rank and a generation in range and exactly one of a chunk and a reason,
 * both inside the input; encoding it again and decoding that gives the same entry. */
#include "tests/fuzz/fuzz.h"
#include "wire/log_entry.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static int inside(const char *p, size_t n, const uint8_t *data, size_t size)
{
    return p >= (const char *)data && p + n <= (const char *)data + size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *v[LOG_ENTRY_MAX_FIELDS + 2];
    size_t lens[LOG_ENTRY_MAX_FIELDS + 2], n = 0;
    const char *s = (const char *)data, *end = s + size;
    while (n < LOG_ENTRY_MAX_FIELDS + 2) { /* up to two strings more than the decoder takes */
        const char *sep = memchr(s, 0x1f, (size_t)(end - s));
        const char *stop = sep ? sep : end;
        v[n] = s, lens[n] = (size_t)(stop - s), n++;
        if (!sep) break;
        s = sep + 1;
    }
    log_entry e, again;
    if (log_entry_decode(n, v, lens, &e) != 0) return 0;
    FUZZ_CHECK(n % 2 == 0 && n <= LOG_ENTRY_MAX_FIELDS, "%zu strings accepted", n);
    FUZZ_CHECK(e.rank >= 0 && e.rank <= LOG_ENTRY_NUM_MAX && e.gen >= 0 && e.gen <= LOG_ENTRY_NUM_MAX, "rank %ld, generation %ld",
               e.rank, e.gen);
    FUZZ_CHECK(!e.text != !e.end, "a chunk and a reason, or neither");
    FUZZ_CHECK(e.text ? inside(e.text, e.text_len, data, size) : inside(e.end, e.end_len, data, size), "a value outside the input");
    log_entry_nums nums;
    const char *argv[LOG_ENTRY_ARGC];
    size_t alens[LOG_ENTRY_ARGC];
    FUZZ_CHECK(log_entry_encode(&e, &nums, argv, alens) == 0, "a decoded entry cannot be encoded");
    FUZZ_CHECK(log_entry_decode(LOG_ENTRY_ARGC, argv, alens, &again) == 0, "an encoded entry does not decode");
    FUZZ_CHECK(again.rank == e.rank && again.gen == e.gen && again.text == e.text && again.text_len == e.text_len &&
                   again.end == e.end && again.end_len == e.end_len,
               "the entry changed in a round trip");
    return 0;
}
