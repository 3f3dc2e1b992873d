/* fuzz_tsarchive.c - uploaded model files (server/tsarchive.c): any bytes a client sends as the
 * `file` part of POST /v1/models/{name}/versions.
 *
 * Checks: the answer is 0 or -1; a refusal has a message of printable ASCII (the route puts it in
 * JSON); the seed corpus holds torch 1.13's own archives (tests/data/torchscript/archives). */
#include "server/tsarchive.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an allocation of exactly the input's size (libFuzzer's own buffer is one too) */
    char msg[300];
    msg[0] = '\0';
    int rc = tsarchive_check(data, size, msg, sizeof(msg));
    FUZZ_CHECK(rc == 0 || rc == -1, "rc %d", rc);
    if (rc == -1) {
        FUZZ_CHECK(msg[0], "a refusal without a message");
        for (const char *c = msg; *c; c++)
            FUZZ_CHECK(*c >= 0x20 && *c < 0x7f, "a message with byte 0x%02x: %s", (unsigned char)*c, msg);
    }
    return 0;
}
