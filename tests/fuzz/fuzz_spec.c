/* fuzz_spec.c - POST /v1/jobs bodies, the way the server takes them (server/http.c, api_jobs.c):
 * nesting depth first (over the limit: 400 before parsing), then jansson with duplicate keys
 * rejected, objects only, then spec_validate_job (which runs place_spec_validate for placement).
 *
 * Checks: the depth the server measures on the raw text equals the depth of what jansson parsed
 * (else the limit can be bypassed or refuses valid bodies); an accepted job has the fields
 * api_jobs.c stores; a refusal names a field and a message that fit in a JSON string, as
 * http_error needs (invalid UTF-8 there turns the 400 into a 500). */
#include "server/http.h"
#include "server/spec.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    json_object_seed(1); /* the same hashing on every run, so a crash replays */
    return 0;
}

static int known_type(const char *t)
{
    return strcmp(t, "placement") == 0 || strcmp(t, "training") == 0 || strcmp(t, "inference") == 0 || strcmp(t, "federated") == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    int depth = http_json_depth(text, size);
    if (depth > FUZZ_JSON_MAX_DEPTH) return 0;
    json_error_t jerr;
    json_t *body = json_loadb(text, size, JSON_REJECT_DUPLICATES, &jerr);
    if (!body) return 0;
    if (!fuzz_known("json-depth"))
        FUZZ_CHECK(fuzz_json_depth(body) == depth, "http_json_depth says %d, the parsed value is %d deep", depth,
                   fuzz_json_depth(body));
    if (json_is_object(body)) {
        job_new job;
        char field[256] = "", msg[512] = ""; /* the sizes api_jobs.c passes */
        memset(&job, 0, sizeof job);
        int rc = spec_validate_job(body, &job, field, sizeof field, msg, sizeof msg);
        FUZZ_CHECK(rc == 0 || rc == -1, "spec_validate_job returned %d", rc);
        if (rc == 0) {
            FUZZ_CHECK(known_type(job.type), "accepted type '%s'", job.type);
            FUZZ_CHECK(job.name[0] != '\0' && fuzz_utf8_valid(job.name), "accepted a name that is empty or not UTF-8");
            FUZZ_CHECK(job.priority >= 0 && job.priority <= 2, "priority %d", job.priority);
            FUZZ_CHECK(job.slots >= 1, "slots %d", job.slots);
            FUZZ_CHECK(job.spec && job.spec == json_object_get(body, "spec") && json_is_object(job.spec),
                       "spec is not the body's spec object");
        } else {
            FUZZ_CHECK(msg[0] != '\0', "refused without a message (field '%s')", field);
            if (!fuzz_known("utf8-error-text"))
                FUZZ_CHECK(fuzz_utf8_valid(field) && fuzz_utf8_valid(msg), "error text is not UTF-8: field '%s', msg '%s'", field,
                           msg);
        }
    }
    json_decref(body);
    return 0;
}
