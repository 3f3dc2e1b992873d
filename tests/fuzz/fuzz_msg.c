/* fuzz_msg.c - the messages read back from Redis (wire/msg.c): task entries, which the
 * scheduler and the workers decode, and events, which the server decodes and persists; and the
 * inference request and reply lines (wire/infer_wire.h), which workers and the server parse, and the
 * direct path's frame heads (wire/infer_frame.h).
 * Every input is tried as each (after a NUL, as hiredis hands them over).
 *
 * Checks: a decoded message respects the ranges msg.h promises, and encoding it again and
 * decoding that gives the same message (what a worker or the server re-publishes must be what
 * it read; a field cut in the middle of a UTF-8 sequence could not be encoded again). */
#include "wire/infer_frame.h"
#include "wire/infer_wire.h"
#include "wire/msg.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    json_object_seed(1);
    return 0;
}

static int terminated(const char *s, size_t size)
{
    return memchr(s, '\0', size) != NULL;
}

static void check_task(const char *s)
{
    task_msg t, again;
    if (msg_task_decode(s, &t) != 0) {
        FUZZ_CHECK(t.spec == NULL && t.job_id[0] == '\0', "a refused task is not left cleared");
        return;
    }
    FUZZ_CHECK(terminated(t.job_id, sizeof t.job_id) && terminated(t.tenant, sizeof t.tenant) && terminated(t.type, sizeof t.type),
               "unterminated field");
    FUZZ_CHECK(t.priority >= 0 && t.priority <= 2, "priority %d", t.priority);
    FUZZ_CHECK(t.slots >= 1 && t.attempt >= 0, "slots %d, attempt %d", t.slots, t.attempt);
    FUZZ_CHECK(t.preemptible == 0 || t.preemptible == 1, "preemptible %d", t.preemptible);
    FUZZ_CHECK(t.spec != NULL, "no spec");
    char *enc = msg_task_encode(&t);
    FUZZ_CHECK(enc != NULL, "a decoded task cannot be encoded again");
    FUZZ_CHECK(msg_task_decode(enc, &again) == 0, "a re-encoded task does not decode: %s", enc);
    FUZZ_CHECK(strcmp(t.job_id, again.job_id) == 0 && strcmp(t.tenant, again.tenant) == 0 && strcmp(t.type, again.type) == 0 &&
                   t.priority == again.priority && t.slots == again.slots && t.attempt == again.attempt &&
                   t.preemptible == again.preemptible && json_equal(t.spec, again.spec),
               "task changed in a round trip: %s", enc);
    free(enc);
    msg_task_clear(&again);
    msg_task_clear(&t);
}

static void check_event(const char *s)
{
    event_msg e, again;
    if (msg_event_decode(s, &e) != 0) {
        FUZZ_CHECK(e.result == NULL && e.id[0] == '\0', "a refused event is not left cleared");
        return;
    }
    FUZZ_CHECK(terminated(e.id, sizeof e.id) && terminated(e.job_id, sizeof e.job_id) && terminated(e.source, sizeof e.source) &&
                   terminated(e.state, sizeof e.state) && terminated(e.reason, sizeof e.reason) &&
                   terminated(e.worker, sizeof e.worker),
               "unterminated field");
    FUZZ_CHECK(e.result == NULL || !json_is_null(e.result), "a null result is kept as a JSON null");
    if (!fuzz_known("utf8-truncation"))
        FUZZ_CHECK(fuzz_utf8_valid(e.source) && fuzz_utf8_valid(e.state) && fuzz_utf8_valid(e.reason) && fuzz_utf8_valid(e.worker),
                   "a field was cut inside a UTF-8 sequence (source '%s', state '%s', worker '%s', reason '%s')", e.source, e.state,
                   e.worker, e.reason);
    char *enc = msg_event_encode(&e);
    if (enc || !fuzz_known("utf8-truncation")) {
        FUZZ_CHECK(enc != NULL, "a decoded event cannot be encoded again");
        FUZZ_CHECK(msg_event_decode(enc, &again) == 0, "a re-encoded event does not decode: %s", enc);
        FUZZ_CHECK(strcmp(e.id, again.id) == 0 && strcmp(e.job_id, again.job_id) == 0 && strcmp(e.source, again.source) == 0 &&
                       strcmp(e.state, again.state) == 0 && strcmp(e.reason, again.reason) == 0 &&
                       strcmp(e.worker, again.worker) == 0 && e.ts == again.ts && e.progress == again.progress &&
                       (e.result ? again.result && json_equal(e.result, again.result) : !again.result),
                   "event changed in a round trip: %s", enc);
        free(enc);
        msg_event_clear(&again);
    }
    msg_event_clear(&e);
}

/* a parsed request line is made of fields that write the same head again; a reply's parts lie inside it */
static void check_wire(const uint8_t *data, size_t size)
{
    char *raw = malloc(size + 1);
    if (!raw) return;
    memcpy(raw, data, size);
    raw[size] = '\0';
    iw_request r;
    if (iw_request_parse(raw, size, &r) == 0) {
        if (r.json_len > r.len || r.body + r.len != raw + size) abort();
        char head[IW_HEAD_MAX * 4];
        uint64_t id = strtoull(r.id, NULL, 10);
        int hl = iw_request_head(head, sizeof(head), id, r.reply_to, r.json_len);
        if (hl < 0 || (size_t)hl > (size_t)(r.body - raw) + 20) abort();
    }
    uint64_t id;
    int status;
    const char *body;
    size_t blen;
    if (iw_reply_parse((const char *)data, size, &id, &status, &body, &blen) == 0)
        if (status < 200 || status > 599 || body < (const char *)data || body + blen != (const char *)data + size) abort();
    free(raw);
}

/* a decoded frame head is within the limits the header promises and encodes back to the same bytes */
static void check_frame(const uint8_t *data, size_t size)
{
    if_head h;
    if (size < IF_HEAD || if_head_decode(data, &h) != 0) return;
    FUZZ_CHECK(h.len <= IF_MAX_BODY && (h.kind != IF_REQUEST || h.arg <= h.len) &&
                   (h.kind != IF_REPLY || (h.arg >= 100 && h.arg <= 599)),
               "a frame head outside its limits");
    unsigned char again[IF_HEAD];
    if_head_encode(again, &h);
    FUZZ_CHECK(memcmp(again, data, IF_HEAD) == 0, "a frame head changed in a round trip");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_wire(data, size);
    check_frame(data, size);
    char *s = fuzz_cstr(data, size);
    check_task(s);
    check_event(s);
    free(s);
    return 0;
}
