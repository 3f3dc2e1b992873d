/* test_ts_serve.c - workers/serve/ts_request.c and ts_serve.c: OIP v2 requests checked against a
 * signature (every refusal naming its field), numbers read exactly (INT64 beyond 2^53), replies
 * formatted so that they read back exactly; and, with libtorch, ts_batch on the fixtures of
 * tests/data/torchscript/serve (make.py there): torch's own outputs within 1e-5, batches of mixed
 * shapes and of good and bad requests, the model's faults, metadata that lies. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/testjson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workers/serve/scan.h"
#include "workers/serve/torch_model.h"
#include "workers/serve/ts_request.h"
#include "workers/serve/ts_serve.h"
#include "testpath.h"

/* x FP32 [-1, 2, 3], ids INT64 [-1, -1] */
static model_sig two_inputs(void)
{
    json_t *j = J("{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,2,3]},{'name':'ids','datatype':'INT64','shape':[-1,-1]}],"
                  "'outputs':[{'name':'y','datatype':'FP32','shape':[-1,2]}]}");
    model_sig s;
    char f[128], m[256];
    assert_int_equal(sig_parse(j, &s, f, sizeof f, m, sizeof m), 0);
    json_decref(j);
    return s;
}

/* a request body from test JSON (' for ") */
static char *body_of(const char *text)
{
    json_t *j = J(text);
    char *b = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return b;
}

static void test_scan_inputs(void **state)
{
    (void)state;
    const char *s =
        "{\"id\":\"a\",\"inputs\":[{\"name\":\"x\",\"data\":[[1,2],[3]],\"shape\":[1]},{\"data\":7,\"name\":\"y\"}],\"z\":1}";
    scan_range r[4];
    int n = -1;
    assert_int_equal(scan_inputs_data(s, strlen(s), r, 4, &n), 0);
    assert_int_equal(n, 2);
    assert_memory_equal(s + r[0].start, "[[1,2],[3]]", r[0].end - r[0].start);
    assert_memory_equal(s + r[1].start, "7", r[1].end - r[1].start);
    assert_int_equal(scan_inputs_data(s, strlen(s), r, 1, &n), -1); /* more than cap */
    const char *empty = "{\"inputs\":[]}";
    assert_int_equal(scan_inputs_data(empty, strlen(empty), r, 4, &n), 0);
    assert_int_equal(n, 0);
    const char *bad[] = {
        "{\"inputs\":[{\"name\":\"x\"}]}",            /* no data */
        "{\"inputs\":[{\"data\":[1],\"data\":[2]}]}", /* twice */
        "{\"inputs\":[3]}",                           /* not an object */
        "{\"inputs\":{\"data\":[1]}}",                /* not an array */
        "{\"inputs\":[{\"data\":[1}]}",               /* broken */
        "{\"inputs\":[{\"d\\u0061ta\":[1]}]}",        /* escaped: left to jansson */
        "{\"outputs\":[]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        if (scan_inputs_data(bad[i], strlen(bad[i]), r, 4, &n) == 0) fail_msg("accepted %s", bad[i]);
}

static void test_scan_values(void **state)
{
    (void)state;
    size_t n;
    int64_t i64[4];
    const char *big = "[9007199254740993, -9223372036854775808, 9223372036854775807, 0]";
    assert_int_equal(scan_values(big, strlen(big), SIG_INT64, i64, 4, &n), 0);
    assert_int_equal(n, 4);
    assert_true(i64[0] == 9007199254740993LL && i64[1] == INT64_MIN && i64[2] == INT64_MAX && i64[3] == 0);
    int32_t i32[2];
    assert_int_equal(scan_values("[[2147483647],[-2147483648]]", 28, SIG_INT32, i32, 2, &n), 0);
    assert_true(i32[0] == INT32_MAX && i32[1] == INT32_MIN);
    double d[2];
    assert_int_equal(scan_values("[0.1, 1e300]", 12, SIG_FP64, d, 2, &n), 0);
    assert_true(d[0] == 0.1 && d[1] == 1e300);
    float f[3];
    assert_int_equal(scan_values("[0.1, -2.5e-3, 3]", 17, SIG_FP32, f, 3, &n), 0);
    assert_true(f[0] == 0.1f && f[1] == -2.5e-3f && f[2] == 3.0f);
    /* the fast path (scan.c: Clinger's, and a float midpoint left to strtof) reads exactly what
     * strtof and strtod read: numbers as clients print them, and ties */
    srand(7);
    const char *fmts[] = {"%.9g", "%.6g", "%.17g", "%.3e", "%.12f", "%.1f", "%.16g", "%.19g"};
    for (int i = 0; i < 240000; i++) {
        char text[64];
        double v = ((double)rand() / RAND_MAX - 0.5) * pow(10, rand() % 30 - 15);
        snprintf(text, sizeof text, fmts[i % 8], i % 7 ? v : (double)(float)v);
        float fv;
        double dv;
        size_t one;
        assert_int_equal(scan_values(text, strlen(text), SIG_FP32, &fv, 1, &one), 0);
        assert_int_equal(scan_values(text, strlen(text), SIG_FP64, &dv, 1, &one), 0);
        float fw = strtof(text, NULL);
        double dw = strtod(text, NULL);
        if (memcmp(&fv, &fw, sizeof fv) || memcmp(&dv, &dw, sizeof dv))
            fail_msg("%s: %a %a, strtof/strtod %a %a", text, fv, dv, fw, dw);
    }
    /* ties and near ties: 16 to 19 digits take the long double path (scan.c fast_long), which leaves
     * an exact midpoint (16777217.0000000000 for a float, 9007199254740993 for a double) to strto* */
    const char *ties[] = {"16777217",
                          "16777219",
                          "-33554434",
                          "1.00000005960464477539",
                          "0",
                          "-0",
                          "1e22",
                          "123456789012345e-22",
                          "16777217.0000000000",
                          "-33554433.000000000",
                          "16777217.00000000001",
                          "9007199254740993",
                          "9007199254740993.1",
                          "-9007199254740995",
                          "18014398509481985",
                          "0.30000000000000004",
                          "1.7976931348623157e27",
                          "1.17549435e-38",
                          "3.4028235677973366e38",
                          "123456789.12345678e-27"};
    for (size_t i = 0; i < sizeof ties / sizeof *ties; i++) {
        float fv, fw = strtof(ties[i], NULL);
        double dv, dw = strtod(ties[i], NULL);
        size_t one;
        assert_int_equal(scan_values(ties[i], strlen(ties[i]), SIG_FP32, &fv, 1, &one), 0);
        assert_int_equal(scan_values(ties[i], strlen(ties[i]), SIG_FP64, &dv, 1, &one), 0);
        if (memcmp(&fv, &fw, sizeof fv) || memcmp(&dv, &dw, sizeof dv))
            fail_msg("%s: %a %a, strtof/strtod %a %a", ties[i], fv, dv, fw, dw);
    }
    /* refusals: the index of the value, or -2 past cap */
    struct {
        const char *text;
        sig_dtype t;
        int rc;
        size_t at;
    } bad[] = {
        {"[1, 2.0]", SIG_INT64, -1, 1},
        {"[1e3]", SIG_INT64, -1, 0},
        {"[9223372036854775808]", SIG_INT64, -1, 0},
        {"[1, 2, -9223372036854775809]", SIG_INT64, -1, 2},
        {"[2147483648]", SIG_INT32, -1, 0},
        {"[-]", SIG_INT64, -1, 0},
        {"[1, \"2\"]", SIG_INT64, -1, 1},
        {"[1e39]", SIG_FP32, -1, 0},
        {"[1, 1e309]", SIG_FP64, -1, 1},
        {"[true]", SIG_FP32, -1, 0},
        {"[1, 2, 3, 4, 5]", SIG_INT64, -2, 4},
        /* the grammar, which the skipper leaves to the reader: -3, after the values read */
        {"[1 2]", SIG_INT64, -3, 1},
        {"[1,,2]", SIG_INT64, -3, 1},
        {"[1,]", SIG_INT64, -3, 1},
        {"[,1]", SIG_INT64, -3, 0},
        {"[1],[2]", SIG_INT64, -3, 1},
        {"[[1],2", SIG_INT64, -3, 2},
        {"[1]]", SIG_INT64, -3, 1},
        {"[1[2]]", SIG_INT64, -3, 1},
        {"1 2", SIG_INT64, -3, 1},
        {"", SIG_INT64, -3, 0},
        {"[", SIG_INT64, -3, 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        n = 99;
        int rc = scan_values(bad[i].text, strlen(bad[i].text), bad[i].t, i64, 4, &n);
        if (rc != bad[i].rc || n != bad[i].at)
            fail_msg("%s: rc %d at %zu, want %d at %zu", bad[i].text, rc, n, bad[i].rc, bad[i].at);
    }
}

/* body with its "data" keys written "d\u0061ta": scan.h does not find them, so the general
 * parser's path reads the body */
static char *slow_of(const char *body)
{
    char *out = malloc(strlen(body) * 2 + 1), *o = out;
    for (const char *p = body; *p;)
        if (!strncmp(p, "\"data\":", 7)) {
            o += sprintf(o, "\"d\\u0061ta\":");
            p += 7;
        } else {
            *o++ = *p++;
        }
    *o = '\0';
    return out;
}

/* parses body against sig; expects 0 */
static void parse_ok(const model_sig *sig, const char *body, ts_request *r)
{
    char err[256] = "";
    if (ts_request_parse(sig, 8, body, strlen(body), 0, r, err, sizeof err)) fail_msg("refused %s: %s", body, err);
}

static void test_parse(void **state)
{
    (void)state;
    model_sig sig = two_inputs();
    /* inputs in another order; nested and flat data; FP64 taken for the FP32 input */
    char *body =
        body_of("{'id':'r1','inputs':[{'name':'ids','datatype':'INT64','shape':[2,3],'data':[[9007199254740993,-1,2],[3,4,5]]},"
                "{'name':'x','datatype':'FP64','shape':[2,2,3],'data':[1,2,3,4,5,6,7,8,9,10,11,0.1]}]}");
    /* and the same with the data keys escaped: the general parser's path must read the same */
    char *slow = slow_of(body);
    const char *bodies[] = {body, slow};
    for (int b = 0; b < 2; b++) {
        ts_request r;
        parse_ok(&sig, bodies[b], &r);
        assert_int_equal(r.samples, 2);
        assert_int_equal(r.at[0], 1);
        assert_int_equal(r.at[1], 0);
        assert_int_equal(r.count[0], 12);
        assert_int_equal(r.count[1], 6);
        assert_true(r.shape[1][1] == 3);
        assert_int_equal(ts_request_sample_bytes(&sig, &r, 0), 6 * sizeof(float));
        assert_int_equal(ts_request_sample_bytes(&sig, &r, 1), 3 * sizeof(int64_t));
        assert_true(b == 0 ? r.range[0].end > 0 : r.range[0].end == 0);
        float x[12];
        int64_t ids[6];
        char err[256];
        assert_int_equal(ts_request_fill(&sig, &r, bodies[b], 0, x, err, sizeof err), 0);
        assert_int_equal(ts_request_fill(&sig, &r, bodies[b], 1, ids, err, sizeof err), 0);
        assert_true(x[0] == 1.0f && x[10] == 11.0f && x[11] == 0.1f);
        assert_true(ids[0] == 9007199254740993LL && ids[1] == -1 && ids[5] == 5);
        ts_request_free(&r);
    }
    free(body);
    free(slow);

    /* same shapes but the batch: one pass; another free dimension: not */
    ts_request a, b, c;
    char *ba = body_of("{'inputs':[{'name':'x','datatype':'FP32','shape':[1,2,3],'data':[1,2,3,4,5,6]},"
                       "{'name':'ids','datatype':'INT64','shape':[1,2],'data':[1,2]}]}");
    char *bb = body_of("{'inputs':[{'name':'x','datatype':'FP32','shape':[2,2,3],'data':[1,2,3,4,5,6,1,2,3,4,5,6]},"
                       "{'name':'ids','datatype':'INT64','shape':[2,2],'data':[1,2,3,4]}]}");
    char *bc = body_of("{'inputs':[{'name':'x','datatype':'FP32','shape':[1,2,3],'data':[1,2,3,4,5,6]},"
                       "{'name':'ids','datatype':'INT64','shape':[1,3],'data':[1,2,3]}]}");
    parse_ok(&sig, ba, &a);
    parse_ok(&sig, bb, &b);
    parse_ok(&sig, bc, &c);
    assert_true(ts_request_same_shapes(&sig, &a, &b));
    assert_false(ts_request_same_shapes(&sig, &a, &c));
    ts_request_free(&a);
    ts_request_free(&b);
    ts_request_free(&c);
    free(ba);
    free(bb);
    free(bc);
}

/* the binary extension: x's floats and ids' integers after the JSON, in the order of the inputs
 * array; the same values as JSON; sizes that do not add up are refused naming the field */
static void test_binary(void **state)
{
    (void)state;
    model_sig sig = two_inputs();
    const float xs[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0.1f};
    const int64_t ids[6] = {9007199254740993LL, -1, 2, 3, 4, 5};
    char *head = body_of("{'inputs':[{'name':'ids','datatype':'INT64','shape':[2,3],'parameters':{'binary_data_size':48}},"
                         "{'name':'x','datatype':'FP32','shape':[2,2,3],'parameters':{'binary_data_size':48}}]}");
    size_t hl = strlen(head), len = hl + sizeof ids + sizeof xs;
    char *body = malloc(len);
    memcpy(body, head, hl);
    memcpy(body + hl, ids, sizeof ids);
    memcpy(body + hl + sizeof ids, xs, sizeof xs);
    ts_request r;
    char err[256] = "";
    if (ts_request_parse(&sig, 8, body, len, hl, &r, err, sizeof err)) fail_msg("refused: %s", err);
    float x[12];
    int64_t got[6];
    assert_int_equal(ts_request_fill(&sig, &r, body, 0, x, err, sizeof err), 0);
    assert_int_equal(ts_request_fill(&sig, &r, body, 1, got, err, sizeof err), 0);
    assert_memory_equal(x, xs, sizeof xs);
    assert_memory_equal(got, ids, sizeof ids);
    ts_request_free(&r);
    /* one byte short, one too many, a size that is not the shape's, FP64 for the FP32 input */
    assert_int_not_equal(ts_request_parse(&sig, 8, body, len - 1, hl, &r, err, sizeof err), 0);
    assert_non_null(strstr(err, "binary_data_size"));
    ts_request_free(&r);
    char *more = malloc(len + 1);
    memcpy(more, body, len);
    assert_int_not_equal(ts_request_parse(&sig, 8, more, len + 1, hl, &r, err, sizeof err), 0);
    assert_non_null(strstr(err, "add up to"));
    ts_request_free(&r);
    free(more);
    char *wrong = body_of("{'inputs':[{'name':'ids','datatype':'INT64','shape':[2,3],'parameters':{'binary_data_size':40}},"
                          "{'name':'x','datatype':'FP64','shape':[2,2,3],'parameters':{'binary_data_size':48}}]}");
    assert_int_not_equal(ts_request_parse(&sig, 8, wrong, strlen(wrong), 10, &r, err, sizeof err), 0);
    ts_request_free(&r);
    char *big = malloc(strlen(wrong) + 96);
    memcpy(big, wrong, strlen(wrong));
    assert_int_not_equal(ts_request_parse(&sig, 8, big, strlen(wrong) + 96, strlen(wrong), &r, err, sizeof err), 0);
    assert_string_equal(err, "inputs[0].parameters.binary_data_size: must be 48 (6 INT64 values)");
    ts_request_free(&r);
    /* a non-finite float in the bytes */
    float inf = INFINITY;
    memcpy(body + hl + sizeof ids + 4, &inf, sizeof inf);
    assert_int_equal(ts_request_parse(&sig, 8, body, len, hl, &r, err, sizeof err), 0);
    assert_int_not_equal(ts_request_fill(&sig, &r, body, 0, x, err, sizeof err), 0);
    assert_string_equal(err, "inputs[1].data: value 1 is not a finite FP32 number");
    ts_request_free(&r);
    free(big);
    free(wrong);
    free(body);
    free(head);
}

/* body is refused with a message starting with msg */
static void expect_refused_text(const model_sig *sig, char *body, const char *msg)
{
    ts_request r;
    char err[256] = "";
    int rc = ts_request_parse(sig, 8, body, strlen(body), 0, &r, err, sizeof err);
    for (int k = 0; rc == 0 && k < sig->nin; k++) {
        static char buf[1 << 12];
        rc = ts_request_fill(sig, &r, body, k, buf, err, sizeof err);
    }
    if (rc == 0) fail_msg("accepted %s", body);
    if (strncmp(err, msg, strlen(msg))) fail_msg("%s\n  said: %s\n  want: %s", body, err, msg);
    ts_request_free(&r);
    free(body);
}

/* body (test JSON, or raw text when it does not start with '{' + ') is refused with a message
 * starting with msg, on both paths (scanned data, and the general parser's) */
static void expect_refused(const model_sig *sig, const char *text, const char *msg)
{
    char *body = text[0] == '{' && text[1] == '\'' ? body_of(text) : strdup(text);
    expect_refused_text(sig, slow_of(body), msg);
    expect_refused_text(sig, body, msg);
}

#define X_OK "{'name':'x','datatype':'FP32','shape':[1,2,3],'data':[1,2,3,4,5,6]}"
#define IDS_OK "{'name':'ids','datatype':'INT64','shape':[1,2],'data':[1,2]}"

static void test_refusals(void **state)
{
    (void)state;
    model_sig sig = two_inputs();
    expect_refused(&sig, "{\"inputs\":", "the body is not valid JSON: ");
    expect_refused(&sig, "{\"inputs\":[], \"inputs\":[]}", "the body is not valid JSON: duplicate object key");
    expect_refused(&sig, "[1]", "inputs: must be an array of the model's 2 inputs (x, ids)");
    expect_refused(&sig, "{'inputs':{}}", "inputs: must be an array of the model's 2 inputs (x, ids)");
    expect_refused(&sig, "{'inputs':[]}", "inputs: missing input 'x' (the model takes x, ids)");
    expect_refused(&sig, "{'inputs':[" X_OK "]}", "inputs: missing input 'ids' (the model takes x, ids)");
    expect_refused(&sig, "{'inputs':[" X_OK "," IDS_OK "," X_OK "]}", "inputs: must hold the model's 2 inputs (x, ids), not 3");
    expect_refused(&sig, "{'inputs':[" X_OK ",{'name':'y','datatype':'FP32','shape':[1],'data':[1]}]}",
                   "inputs[1].name: the model has no input 'y' (it takes x, ids)");
    expect_refused(&sig, "{'inputs':[" X_OK "," X_OK "]}", "inputs[1].name: input 'x' is already inputs[0]");
    expect_refused(&sig, "{'inputs':[" X_OK ",3]}", "inputs[1]: must be an object {name, datatype, shape, data}");
    expect_refused(&sig, "{'inputs':[" X_OK ",{'datatype':'INT64'}]}", "inputs[1].name: must be a string (the model takes x, ids)");
    expect_refused(&sig, "{'inputs':[" X_OK ",{'name':'ids','datatype':'INT32','shape':[1,2],'data':[1,2]}]}",
                   "inputs[1].datatype: must be INT64 (the model's input 'ids')");
    expect_refused(&sig, "{'inputs':[{'name':'x','datatype':'INT64','shape':[1,2,3],'data':[1,2,3,4,5,6]}," IDS_OK "]}",
                   "inputs[0].datatype: must be FP32 (or FP64) (the model's input 'x')");
    expect_refused(&sig, "{'inputs':[{'name':'x','shape':[1,2,3],'data':[1,2,3,4,5,6]}," IDS_OK "]}",
                   "inputs[0].datatype: must be FP32 (or FP64) (the model's input 'x')");
    expect_refused(&sig, "{'inputs':[{'name':'x','datatype':'FP32','shape':[1,6],'data':[1,2,3,4,5,6]}," IDS_OK "]}",
                   "inputs[0].shape: must have 3 dimensions (the model's input 'x' is [-1, 2, 3])");
    expect_refused(&sig, "{'inputs':[{'name':'x','datatype':'FP32','shape':[1,2,4],'data':[1,2,3,4,5,6,7,8]}," IDS_OK "]}",
                   "inputs[0].shape[2]: must be 3 (the model's input 'x' is [-1, 2, 3])");
    expect_refused(&sig, "{'inputs':[{'name':'x','datatype':'FP32','shape':[0,2,3],'data':[]}," IDS_OK "]}",
                   "inputs[0].shape[0]: must be in [1, 8] samples per request");
    expect_refused(&sig, "{'inputs':[{'name':'x','datatype':'FP32','shape':[9,2,3],'data':[]}," IDS_OK "]}",
                   "inputs[0].shape[0]: must be in [1, 8] samples per request");
    expect_refused(&sig, "{'inputs':[" X_OK ",{'name':'ids','datatype':'INT64','shape':[2,1],'data':[1,2]}]}",
                   "inputs[1].shape[0]: must be 1, the batch of the inputs before it");
    expect_refused(&sig, "{'inputs':[" X_OK ",{'name':'ids','datatype':'INT64','shape':[1,0],'data':[]}]}",
                   "inputs[1].shape[1]: must be a positive integer (the model's input 'ids' is [-1, -1])");
    expect_refused(&sig, "{'inputs':[" X_OK ",{'name':'ids','datatype':'INT64','shape':[1,'2'],'data':[1,2]}]}",
                   "inputs[1].shape[1]: must be a positive integer (the model's input 'ids' is [-1, -1])");
    expect_refused(&sig, "{'inputs':[" X_OK ",{'name':'ids','datatype':'INT64','shape':[1,1000000],'data':[1,2]}]}",
                   "inputs[1].shape: more values than a body of");
    expect_refused(&sig, "{'inputs':[" X_OK ",{'name':'ids','datatype':'INT64','shape':[1,2]}]}",
                   "inputs[1].data: missing (the values, flat or nested)");
    /* the values (read by ts_request_fill) */
    expect_refused(&sig, "{'inputs':[" X_OK ",{'name':'ids','datatype':'INT64','shape':[1,2],'data':[1,2.5]}]}",
                   "inputs[1].data: value 1 is not an integer in the INT64 range");
    /* past INT64: the scanned path names the value; jansson (the general parser's path) refuses the text */
    const char *huge = "{\"inputs\":[{\"name\":\"ids\",\"datatype\":\"INT64\",\"shape\":[1,2],\"data\":[1,9223372036854775808]},"
                       "{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,3,4,5,6]}]}";
    expect_refused_text(&sig, strdup(huge), "inputs[0].data: value 1 is not an integer in the INT64 range");
    expect_refused_text(&sig, slow_of(huge), "the body is not valid JSON: too big integer");
    expect_refused_text(
        &sig,
        strdup("{\"inputs\":[{\"name\":\"ids\",\"datatype\":\"INT64\",\"shape\":[1,2],\"data\":[-9223372036854775809,1]},"
               "{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,3,4,5,6]}]}"),
        "inputs[0].data: value 0 is not an integer in the INT64 range");
    expect_refused(&sig, "{'inputs':[" IDS_OK ",{'name':'x','datatype':'FP64','shape':[1,2,3],'data':[1,2,3,4,5,1e300]}]}",
                   "inputs[1].data: value 5 is not a finite FP32 number");
    expect_refused(&sig, "{'inputs':[" IDS_OK ",{'name':'x','datatype':'FP32','shape':[1,2,3],'data':[1,2,3,4,5]}]}",
                   "inputs[1].data: must hold 6 values (shape [1, 2, 3]), not 5");
    expect_refused(&sig, "{'inputs':[" IDS_OK ",{'name':'x','datatype':'FP32','shape':[1,2,3],'data':[1,2,3,4,5,6,7]}]}",
                   "inputs[1].data: must hold 6 values (shape [1, 2, 3]), not more than 6");
    expect_refused(&sig, "{'inputs':[" IDS_OK ",{'name':'x','datatype':'FP32','shape':[1,2,3],'data':[1,2,3,4,5,'6']}]}",
                   "inputs[1].data: value 5 is not a finite FP32 number");

    /* a big fixed input: the brief's example message */
    json_t *j = J("{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,3,224,224]}]}");
    model_sig img;
    char f[128], m[256];
    assert_int_equal(sig_parse(j, &img, f, sizeof f, m, sizeof m), 0);
    json_decref(j);
    expect_refused(&img, "{'inputs':[{'name':'x','datatype':'FP32','shape':[1,3,224,225],'data':[]}]}",
                   "inputs[0].shape[3]: must be 224 (the model's input 'x' is [-1, 3, 224, 224])");
}

static void test_reply(void **state)
{
    (void)state;
    model_sig sig = two_inputs();
    char *body = body_of("{'id':'q\\\"1','inputs':[" X_OK "," IDS_OK "]}");
    ts_request r;
    parse_ok(&sig, body, &r);
    /* a pass of 3 samples; this request is row 1 */
    float y[3 * 2] = {0, 0, 0.1f, -3.4028235e38f, 0, 0};
    double z[3] = {0, 0.1, 0};
    int32_t w[3] = {0, INT32_MIN, 0};
    int64_t v[3 * 2] = {0, 0, 9007199254740993LL, INT64_MIN, 0, 0};
    tm_tensor out[4] = {
        {SIG_FP32, 2, {3, 2}, y},
        {SIG_FP64, 1, {3}, z},
        {SIG_INT32, 1, {3}, w},
        {SIG_INT64, 2, {3, 2}, v},
    };
    model_sig none = sig;
    none.nout = 0; /* outputs named output0.. */
    char err[256];
    assert_int_equal(ts_outputs_check(&none, out, 4, 3, err, sizeof err), 0);
    char *text = ts_reply(&none, "m\"x", 7, &r, out, 4, 1, err, sizeof err);
    assert_non_null(text);
    assert_string_equal(
        text, "{\"model_name\":\"m\\\"x\",\"model_version\":\"7\",\"id\":\"q\\\"1\",\"outputs\":["
              "{\"name\":\"output0\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[0.100000001,-3.40282347e+38]},"
              "{\"name\":\"output1\",\"datatype\":\"FP64\",\"shape\":[1],\"data\":[0.10000000000000001]},"
              "{\"name\":\"output2\",\"datatype\":\"INT32\",\"shape\":[1],\"data\":[-2147483648]},"
              "{\"name\":\"output3\",\"datatype\":\"INT64\",\"shape\":[1,2],\"data\":[9007199254740993,-9223372036854775808]}]}");
    /* the text reads back to the same values */
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    json_t *d0 = json_object_get(json_array_get(json_object_get(j, "outputs"), 0), "data");
    assert_true((float)json_real_value(json_array_get(d0, 0)) == 0.1f);
    assert_true((float)json_real_value(json_array_get(d0, 1)) == -3.4028235e38f);
    json_decref(j);
    free(text);

    /* NaN or infinity in this request's rows: refused; in another request's rows: not its concern */
    y[3] = INFINITY;
    assert_null(ts_reply(&none, "m", 1, &r, out, 1, 1, err, sizeof err));
    assert_string_equal(err, "inputs: the model's output 'output0' is infinite for sample 0 of this request (JSON cannot carry it; "
                             "values too large?)");
    y[3] = 0, z[2] = NAN;
    assert_null(ts_reply(&none, "m", 1, &r, out, 2, 2, err, sizeof err));
    assert_non_null(strstr(err, "'output1' is NaN"));
    text = ts_reply(&none, "m", 1, &r, out, 2, 0, err, sizeof err);
    assert_non_null(text);
    free(text);
    ts_request_free(&r);
    free(body);
}

static void test_outputs_check(void **state)
{
    (void)state;
    model_sig sig = two_inputs(); /* declares y FP32 [-1, 2] */
    float y[8];
    int64_t v[8];
    char err[256];
    tm_tensor good = {SIG_FP32, 2, {4, 2}, y};
    assert_int_equal(ts_outputs_check(&sig, &good, 1, 4, err, sizeof err), 0);
    tm_tensor two[2] = {good, good};
    assert_int_equal(ts_outputs_check(&sig, two, 2, 4, err, sizeof err), -1);
    assert_string_equal(err, "the model returned 2 outputs, its metadata declares 1");
    tm_tensor wrong_type = {SIG_INT64, 2, {4, 2}, v};
    assert_int_equal(ts_outputs_check(&sig, &wrong_type, 1, 4, err, sizeof err), -1);
    assert_string_equal(err, "the model's output 'y' is INT64, its metadata declares FP32");
    tm_tensor wrong_dim = {SIG_FP32, 2, {2, 4}, y};
    assert_int_equal(ts_outputs_check(&sig, &wrong_dim, 1, 2, err, sizeof err), -1);
    assert_string_equal(err, "the model's output 'y' has shape [2, 4], its metadata declares [-1, 2]");
    tm_tensor flat = {SIG_FP32, 1, {8}, y};
    assert_int_equal(ts_outputs_check(&sig, &flat, 1, 4, err, sizeof err), -1);
    assert_string_equal(
        err, "the model's output 'y' has shape [8] for a batch of 4 samples: it is not batched along its first dimension");
    tm_tensor scalar = {SIG_FP32, 0, {0}, y};
    sig.nout = 0;
    assert_int_equal(ts_outputs_check(&sig, &scalar, 1, 1, err, sizeof err), -1);
    assert_string_equal(
        err, "the model's output 'output0' has shape [] for a batch of 1 samples: it is not batched along its first dimension");
}

/* ---- with libtorch: ts_batch on tests/data/torchscript/serve ---- */

#define SKIP_WITHOUT_TORCH()                                                                                                       \
    do {                                                                                                                           \
        if (!tm_available()) skip();                                                                                               \
    } while (0)

static const char *fixture(const char *name)
{
    char rel[1024];
    snprintf(rel, sizeof rel, "tests/data/torchscript/serve/%s", name);
    return source_path(rel);
}

static json_t *expected(void)
{
    json_error_t jerr;
    json_t *e = json_load_file(fixture("expected.json"), 0, &jerr);
    if (!e) fail_msg("expected.json: %s", jerr.text);
    return e;
}

/* the model `key` of expected.json loaded with its metadata (or `meta` when not NULL) */
static ts_model *load(const json_t *e, const char *key, const json_t *meta, int cap, char *err, size_t el)
{
    model_sig sig;
    char f[128], m[256];
    if (!meta) meta = json_object_get(json_object_get(e, key), "metadata");
    if (sig_parse(meta, &sig, f, sizeof f, m, sizeof m)) fail_msg("%s: %s", f, m);
    char file[64];
    snprintf(file, sizeof file, "%s.pt", key);
    return ts_model_load(fixture(file), &sig, 1, cap, err, el);
}

/* reply text -> max abs difference from the expected outputs (and exact equality of integers,
 * names, datatypes and shapes) */
static double compare(const char *reply, const json_t *outputs)
{
    json_t *j = json_loads(reply, 0, NULL);
    assert_non_null(j);
    json_t *got = json_object_get(j, "outputs");
    assert_int_equal(json_array_size(got), json_array_size(outputs));
    double worst = 0;
    for (size_t i = 0; i < json_array_size(outputs); i++) {
        json_t *g = json_array_get(got, i), *w = json_array_get(outputs, i);
        assert_true(json_equal(json_object_get(g, "name"), json_object_get(w, "name")));
        assert_true(json_equal(json_object_get(g, "datatype"), json_object_get(w, "datatype")));
        assert_true(json_equal(json_object_get(g, "shape"), json_object_get(w, "shape")));
        json_t *gd = json_object_get(g, "data"), *wd = json_object_get(w, "data");
        assert_int_equal(json_array_size(gd), json_array_size(wd));
        for (size_t k = 0; k < json_array_size(wd); k++) {
            json_t *a = json_array_get(gd, k), *b = json_array_get(wd, k);
            if (json_is_integer(b)) {
                if (!json_is_integer(a) || json_integer_value(a) != json_integer_value(b))
                    fail_msg("output %zu value %zu: %lld, want %lld", i, k, (long long)json_integer_value(a),
                             (long long)json_integer_value(b));
            } else {
                double diff = fabs(json_number_value(a) - json_number_value(b));
                if (diff > worst) worst = diff;
            }
        }
    }
    json_decref(j);
    return worst;
}

static void free_reqs(serve_request *reqs, int n)
{
    for (int i = 0; i < n; i++) {
        free(reqs[i].reply);
        free((char *)reqs[i].body);
    }
}

static void test_expected(void **state)
{
    (void)state;
    SKIP_WITHOUT_TORCH();
    json_t *e = expected();
    char err[512];
    ts_model *m = load(e, "seq", NULL, 8, err, sizeof err);
    if (!m) fail_msg("load: %s", err);
    json_t *cases = json_object_get(json_object_get(e, "seq"), "cases");
    int n = (int)json_array_size(cases);
    /* all at once (three share a pass: their free dimension is 2; one runs alone), then each alone */
    serve_request reqs[8] = {0};
    for (int i = 0; i < n; i++) {
        reqs[i].body = json_dumps(json_object_get(json_array_get(cases, (size_t)i), "request"), JSON_COMPACT);
        reqs[i].len = strlen(reqs[i].body);
    }
    ts_batch(m, "seq", 3, reqs, n);
    for (int i = 0; i < n; i++) {
        if (reqs[i].status != 200) fail_msg("case %d: %d %s", i, reqs[i].status, reqs[i].err);
        double d = compare(reqs[i].reply, json_object_get(json_array_get(cases, (size_t)i), "outputs"));
        if (d > 1e-5) fail_msg("case %d: max abs diff %g", i, d);
        json_t *j = json_loads(reqs[i].reply, 0, NULL);
        assert_true(json_equal(json_object_get(j, "id"),
                               json_object_get(json_object_get(json_array_get(cases, (size_t)i), "request"), "id")));
        assert_string_equal(json_string_value(json_object_get(j, "model_version")), "3");
        json_decref(j);
    }
    for (int i = 0; i < n; i++) {
        serve_request one = {.body = reqs[i].body, .len = reqs[i].len};
        ts_batch(m, "seq", 3, &one, 1);
        assert_int_equal(one.status, 200);
        double d = compare(one.reply, json_object_get(json_array_get(cases, (size_t)i), "outputs"));
        if (d > 1e-5) fail_msg("case %d alone: max abs diff %g", i, d);
        free(one.reply);
    }
    free_reqs(reqs, n);
    /* a cap of 2 samples: the 1 + 2 + 1 samples of the same shape take more passes, same answers */
    ts_model_free(m);
    m = load(e, "seq", NULL, 2, err, sizeof err);
    assert_non_null(m);
    memset(reqs, 0, sizeof reqs);
    for (int i = 0; i < n; i++) {
        reqs[i].body = json_dumps(json_object_get(json_array_get(cases, (size_t)i), "request"), JSON_COMPACT);
        reqs[i].len = strlen(reqs[i].body);
    }
    ts_batch(m, "seq", 3, reqs, n);
    for (int i = 0; i < n; i++) {
        if (reqs[i].status != 200) fail_msg("cap 2, case %d: %d %s", i, reqs[i].status, reqs[i].err);
        assert_true(compare(reqs[i].reply, json_object_get(json_array_get(cases, (size_t)i), "outputs")) <= 1e-5);
    }
    free_reqs(reqs, n);
    ts_model_free(m);
    json_decref(e);
}

static void test_mixed(void **state)
{
    (void)state;
    SKIP_WITHOUT_TORCH();
    json_t *e = expected();
    char err[512];
    ts_model *m = load(e, "seq", NULL, 8, err, sizeof err);
    assert_non_null(m);
    json_t *cases = json_object_get(json_object_get(e, "seq"), "cases");
    char *good0 = json_dumps(json_object_get(json_array_get(cases, 0), "request"), JSON_COMPACT);
    char *good3 = json_dumps(json_object_get(json_array_get(cases, 3), "request"), JSON_COMPACT);
    /* good, broken JSON, a wrong datatype, a value that is not an integer, good */
    const char *texts[] = {
        good0,
        "{\"inputs\":[",
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,4],\"data\":[1,2,3,4,5,6,7,8]},"
        "{\"name\":\"ids\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[1,2]}]}",
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2,4],\"data\":[1,2,3,4,5,6,7,8]},"
        "{\"name\":\"ids\",\"datatype\":\"INT64\",\"shape\":[1,2],\"data\":[1,0.5]}]}",
        good3,
    };
    serve_request reqs[5] = {0};
    for (int i = 0; i < 5; i++)
        reqs[i].body = texts[i], reqs[i].len = strlen(texts[i]);
    ts_batch(m, "seq", 1, reqs, 5);
    int want[5] = {200, 400, 400, 400, 200};
    for (int i = 0; i < 5; i++)
        if (reqs[i].status != want[i]) fail_msg("request %d: %d (%s), want %d", i, reqs[i].status, reqs[i].err, want[i]);
    assert_non_null(strstr(reqs[1].err, "the body is not valid JSON"));
    assert_string_equal(reqs[2].err, "inputs[1].datatype: must be INT64 (the model's input 'ids')");
    assert_string_equal(reqs[3].err, "inputs[1].data: value 1 is not an integer in the INT64 range");
    assert_null(reqs[1].reply);
    assert_true(compare(reqs[0].reply, json_object_get(json_array_get(cases, 0), "outputs")) <= 1e-5);
    assert_true(compare(reqs[4].reply, json_object_get(json_array_get(cases, 3), "outputs")) <= 1e-5);
    for (int i = 0; i < 5; i++)
        free(reqs[i].reply);
    free(good0);
    free(good3);
    ts_model_free(m);
    json_decref(e);
}

static void test_model_faults(void **state)
{
    (void)state;
    SKIP_WITHOUT_TORCH();
    json_t *e = expected();
    char err[512];
    /* picky: a negative value makes it throw, a zero gives -inf; the pass of three runs each alone */
    ts_model *m = load(e, "picky", NULL, 8, err, sizeof err);
    if (!m) fail_msg("load: %s", err);
    const char *texts[] = {
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[1,2.718281828]}]}",
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[1,-1]}]}",
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[0,1]}]}",
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,2],\"data\":[4,1]}]}",
    };
    serve_request reqs[4] = {0};
    for (int i = 0; i < 4; i++)
        reqs[i].body = texts[i], reqs[i].len = strlen(texts[i]);
    ts_batch(m, "picky", 1, reqs, 4);
    assert_int_equal(reqs[0].status, 200);
    assert_int_equal(reqs[1].status, 400);
    assert_int_equal(reqs[2].status, 400);
    assert_int_equal(reqs[3].status, 200);
    if (!strstr(reqs[1].err, "the model's forward pass failed: ")) fail_msg("%s", reqs[1].err);
    assert_string_equal(reqs[2].err,
                        "inputs: the model's output 'y' is infinite for sample 0 of this request (JSON cannot carry it; "
                        "values too large?)");
    json_t *j = json_loads(reqs[3].reply, 0, NULL);
    json_t *d = json_object_get(json_array_get(json_object_get(j, "outputs"), 0), "data");
    assert_true(fabs(json_number_value(json_array_get(d, 0)) - log(4.0)) < 1e-6);
    json_decref(j);
    for (int i = 0; i < 4; i++)
        free(reqs[i].reply);
    ts_model_free(m);

    /* nonbatched: [1, 3] whatever the batch; two 1-sample requests pass alone, a 2-sample one cannot */
    m = load(e, "nonbatched", NULL, 8, err, sizeof err);
    if (!m) fail_msg("load: %s", err);
    const char *nb[] = {
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[1,2,3]}]}",
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[4,5,6]}]}",
        "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,3],\"data\":[1,1,1,2,2,2]}]}",
    };
    serve_request r3[3] = {0};
    for (int i = 0; i < 3; i++)
        r3[i].body = nb[i], r3[i].len = strlen(nb[i]);
    ts_batch(m, "nonbatched", 1, r3, 3);
    assert_int_equal(r3[0].status, 200);
    assert_int_equal(r3[1].status, 200);
    assert_int_equal(r3[2].status, 400);
    assert_non_null(strstr(r3[1].reply, "\"name\":\"output0\",\"datatype\":\"FP32\",\"shape\":[1,3],\"data\":[4,5,6]"));
    assert_string_equal(r3[2].err,
                        "the model's output 'output0' has shape [1, 3] for a batch of 2 samples: it is not batched along its "
                        "first dimension");
    for (int i = 0; i < 3; i++)
        free(r3[i].reply);
    ts_model_free(m);
    json_decref(e);
}

static void test_load_refusals(void **state)
{
    (void)state;
    SKIP_WITHOUT_TORCH();
    json_t *e = expected();
    char err[512];
    struct {
        const char *meta, *msg;
    } lies[] = {
        {"{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,-1,4]},{'name':'ids','datatype':'INT64','shape':[-1,-1]}],"
         "'outputs':[{'name':'mean','datatype':'FP32','shape':[-1,3]}]}",
         "the model returned 2 outputs, its metadata declares 1"},
        {"{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,-1,4]},{'name':'ids','datatype':'INT64','shape':[-1,-1]}],"
         "'outputs':[{'name':'mean','datatype':'FP64','shape':[-1,3]},{'name':'next','datatype':'INT64','shape':[-1,-1]}]}",
         "the model's output 'mean' is FP32, its metadata declares FP64"},
        {"{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,-1,4]},{'name':'ids','datatype':'INT64','shape':[-1,-1]}],"
         "'outputs':[{'name':'mean','datatype':'FP32','shape':[-1,10]},{'name':'next','datatype':'INT64','shape':[-1,-1]}]}",
         "the model's output 'mean' has shape [1, 3], its metadata declares [-1, 10]"},
        {"{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,-1,5]},{'name':'ids','datatype':'INT64','shape':[-1,-1]}]}",
         "the model's forward pass failed: "},
        {"{'inputs':[{'name':'x','datatype':'FP32','shape':[-1,-1,4]}]}", "the model's forward pass failed: "},
    };
    const char *prefix = "the model does not run as its metadata says (a warm-up pass on a batch of 1 of zeros): ";
    for (size_t i = 0; i < sizeof lies / sizeof *lies; i++) {
        json_t *meta = J(lies[i].meta);
        err[0] = '\0';
        ts_model *m = load(e, "seq", meta, 8, err, sizeof err);
        if (m) fail_msg("loaded with %s", lies[i].meta);
        if (strncmp(err, prefix, strlen(prefix)) || strncmp(err + strlen(prefix), lies[i].msg, strlen(lies[i].msg)))
            fail_msg("said: %s\nwant: %s%s", err, prefix, lies[i].msg);
        json_decref(meta);
    }
    /* not a file, not TorchScript: the loader's message */
    model_sig sig;
    char f[128], m2[256];
    assert_int_equal(sig_parse(json_object_get(json_object_get(e, "picky"), "metadata"), &sig, f, sizeof f, m2, sizeof m2), 0);
    assert_null(ts_model_load(fixture("no-such.pt"), &sig, 1, 8, err, sizeof err));
    assert_true(strlen(err) > 0);
    assert_null(ts_model_load(fixture("expected.json"), &sig, 1, 8, err, sizeof err));
    assert_true(strlen(err) > 0);
    /* the signature it serves */
    ts_model *ok = load(e, "picky", NULL, 8, err, sizeof err);
    assert_non_null(ok);
    assert_string_equal(ts_model_sig(ok)->out[0].name, "y");
    ts_model_free(ok);
    json_decref(e);
}

static void test_without_torch(void **state)
{
    (void)state;
    if (tm_available()) skip();
    json_t *e = expected();
    char err[512];
    assert_null(load(e, "seq", NULL, 8, err, sizeof err));
    assert_non_null(strstr(err, "without libtorch"));
    json_decref(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan_inputs),   cmocka_unit_test(test_scan_values),   cmocka_unit_test(test_parse),
        cmocka_unit_test(test_binary),        cmocka_unit_test(test_refusals),      cmocka_unit_test(test_reply),
        cmocka_unit_test(test_outputs_check), cmocka_unit_test(test_expected),      cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_model_faults),  cmocka_unit_test(test_load_refusals), cmocka_unit_test(test_without_torch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
