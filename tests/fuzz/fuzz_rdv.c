/* fuzz_rdv.c - a gang's rendezvous hash as a member reads it (wire/rdv_wire.h, HGETALL): the input is
 * the field/value strings separated by 0x1f bytes (any other byte may be in a string).
 *
 * Checks: a decoded hash has world, n and its addresses in range; every address kept is a non-empty
 * NUL-terminated string shorter than RDV_ADDR_LEN that was in the input; naddrs counts them; an abort
 * reason is terminated within RDV_REASON_LEN. */
#include "tests/fuzz/fuzz.h"
#include "wire/rdv_wire.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *v[RDV_MAX_FIELDS + 2];
    static size_t lens[RDV_MAX_FIELDS + 2];
    size_t n = 0;
    const char *s = (const char *)data, *end = s + size;
    while (n < RDV_MAX_FIELDS + 2) {
        const char *sep = memchr(s, 0x1f, (size_t)(end - s));
        const char *stop = sep ? sep : end;
        v[n] = s, lens[n] = (size_t)(stop - s), n++;
        if (!sep) break;
        s = sep + 1;
    }
    static rdv_state st;
    if (rdv_decode(n, v, lens, &st) != 0) return 0;
    FUZZ_CHECK(n % 2 == 0 && n <= RDV_MAX_FIELDS, "%zu strings accepted", n);
    FUZZ_CHECK(st.world >= 0 && st.world <= RDV_MAX_WORLD + 1 && st.joined >= 0 && st.joined <= RDV_MAX_WORLD, "world %d, n %d",
               st.world, st.joined);
    int count = 0;
    for (int r = 0; r < RDV_MAX_WORLD; r++) {
        if (!st.have[r]) continue;
        count++;
        size_t len = strnlen(st.addrs[r], RDV_ADDR_LEN);
        FUZZ_CHECK(len > 0 && len < RDV_ADDR_LEN, "address %d: %zu bytes", r, len);
        FUZZ_CHECK(memmem(data, size, st.addrs[r], len) != NULL, "address %d not in the input", r);
    }
    FUZZ_CHECK(count == st.naddrs, "naddrs %d, %d kept", st.naddrs, count);
    FUZZ_CHECK(strnlen(st.abort, RDV_REASON_LEN) < RDV_REASON_LEN, "an unterminated reason");
    FUZZ_CHECK(st.aborted || st.abort[0] == '\0', "a reason without an abort");
    return 0;
}
