/* fuzz_body.c - JSON request bodies as the server reads them (http_parse_object, the parser
 * of every JSON route), and the error reply a refused body gets (http_error_body).
 *
 * Checks: a body is either a JSON object or refused with a message; the refusal's reply
 * always exists, serializes, parses back, and keeps the message (JSONTestSuite's
 * n_string_escaped_emoji once made jansson quote half a character, the reply could not be
 * built and the client got a 500). */
#include "server/http.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char msg[512];
    json_t *body = http_parse_object((const char *)data, size, FUZZ_JSON_MAX_DEPTH, msg, sizeof(msg));
    if (body) {
        FUZZ_CHECK(json_is_object(body), "a body that is not an object was accepted");
        json_decref(body);
        return 0;
    }
    FUZZ_CHECK(msg[0], "a refusal without a message");
    json_t *err = http_error_body(GERR_INVALID_JSON, NULL, msg);
    FUZZ_CHECK(err != NULL, "no error reply for: %s", msg);
    char *text = json_dumps(err, JSON_COMPACT);
    FUZZ_CHECK(text != NULL, "the error reply does not serialize");
    json_t *back = json_loads(text, 0, NULL);
    FUZZ_CHECK(back != NULL, "the error reply is not JSON: %s", text);
    const char *m = json_string_value(json_object_get(json_object_get(back, "error"), "message"));
    FUZZ_CHECK(m && strlen(m) > 0, "the error reply lost its message");
    json_decref(back);
    json_decref(err);
    free(text);
    return 0;
}
