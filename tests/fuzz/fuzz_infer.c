/* fuzz_infer.c - inference request bodies, as a replica reads them (workers/serve): any
 * bytes a client sends reach serve_batch unparsed by the server.
 *
 * Checks: serve_batch answers every request (200 with a reply that is JSON with the two
 * outputs of the right shapes, or 400 with a message whose error body keeps it), never crashes; and where the fast
 * scanner found inputs[0].data and read it, jansson reads the same numbers from it. */
#include "tests/fuzz/fuzz.h"
#include "workers/serve/scan.h"
#include "workers/serve/serve.h"
#include "workers/train/ckpt.h"

#include <math.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static serve_model *model;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    json_object_seed(1);
    char path[64], err[256];
    snprintf(path, sizeof(path), "/tmp/gantry-fuzz-infer-%d.model", (int)getpid());
    json_t *arch = json_loads("{\"input\":[1,2,2],\"layers\":[{\"type\":\"dense\",\"units\":3}]}", 0, NULL);
    train_model *m = train_model_create(arch, train_backend_cpu(), 1, 4, err, sizeof(err));
    train_ckpt_state st = {0};
    if (!m || train_ckpt_save(path, m, NULL, &st, err, sizeof(err)) != 0) abort();
    train_model_free(m);
    json_decref(arch);
    model = serve_model_load(path, 8, err, sizeof(err));
    unlink(path);
    if (!model) abort();
    return 0;
}

static void flatten(const json_t *v, double *out, size_t cap, size_t *n, int *ok)
{
    if (json_is_number(v)) {
        if (*n < cap) out[*n] = json_number_value(v);
        (*n)++;
        return;
    }
    if (!json_is_array(v)) {
        *ok = 0;
        return;
    }
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) flatten(e, out, cap, n, ok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    /* the scanner against jansson on the same bytes */
    size_t b, e;
    if (scan_data(body, size, &b, &e) == 0) {
        float fast[64];
        size_t nf;
        int scanned = scan_numbers(body + b, e - b, fast, 64, &nf) == 0;
        json_t *v = json_loadb(body + b, e - b, JSON_DECODE_ANY, NULL);
        double slow[64];
        size_t ns = 0;
        int ok = 1;
        if (v && scanned) {
            flatten(v, slow, 64, &ns, &ok);
            if (ok) {
                FUZZ_CHECK(ns == nf, "the scanner read %zu numbers, jansson %zu", nf, ns);
                for (size_t i = 0; i < nf && i < 64; i++)
                    FUZZ_CHECK(fast[i] == (float)slow[i] || (isinf((float)slow[i]) && !isfinite(fast[i])), "number %zu: %g vs %g",
                               i, fast[i], slow[i]);
            }
        }
        json_decref(v);
    }
    /* two copies in one batch: both answered alike */
    serve_request reqs[2] = {{.body = body, .len = size}, {.body = body, .len = size}};
    serve_batch(model, "m", 1, reqs, 2);
    for (int i = 0; i < 2; i++) {
        FUZZ_CHECK(reqs[i].status == 200 || reqs[i].status == 400, "status %d", reqs[i].status);
        if (reqs[i].status == 400) {
            FUZZ_CHECK(reqs[i].reply == NULL && reqs[i].err[0], "a refusal without a message");
            /* the refusal reaches the client in the API's error shape, with its message: a replica
             * that cannot build it stays silent and the client gets a 504 */
            char *text = serve_error_body(reqs[i].err);
            json_t *back = json_loads(text, 0, NULL);
            json_t *e = json_object_get(back, "error");
            FUZZ_CHECK(json_is_string(json_object_get(e, "code")), "the refusal is not {error:{code,...}}: %s", text);
            FUZZ_CHECK(json_string_value(json_object_get(e, "message")) &&
                           strncmp(json_string_value(json_object_get(e, "message")), reqs[i].err, 8) == 0,
                       "the refusal lost its message '%s': %s", reqs[i].err, text);
            json_decref(back);
            free(text);
            continue;
        }
        json_t *r = json_loads(reqs[i].reply, 0, NULL);
        FUZZ_CHECK(r != NULL, "the reply is not JSON: %.200s", reqs[i].reply);
        json_t *outs = json_object_get(r, "outputs");
        FUZZ_CHECK(json_array_size(outs) == 2, "two outputs");
        json_t *probs = json_array_get(outs, 0), *labels = json_array_get(outs, 1);
        size_t n = (size_t)json_integer_value(json_array_get(json_object_get(labels, "shape"), 0));
        FUZZ_CHECK(json_array_size(json_object_get(labels, "data")) == n, "labels");
        FUZZ_CHECK(json_array_size(json_object_get(probs, "data")) == 3 * n, "probabilities");
        json_decref(r);
        free(reqs[i].reply);
    }
    FUZZ_CHECK(reqs[0].status == reqs[1].status, "the same request answered differently in one batch");
    return 0;
}
