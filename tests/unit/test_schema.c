/* test_schema.c - common/schema: the checks, their field paths and messages,
 * and the JSON Schema written from the same shapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "common/schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const colours[] = {"red", "green", "blue", NULL};
static const char *const circle_v[] = {"circle", NULL}, *const square_v[] = {"square", NULL};
static const sch count_s = {SCH_INT, SCH_IN(1, 64), .dflt = "4"};
static const sch ratio_s = {SCH_NUM, SCH_IN_LO_OPEN(0, 1)};
static const sch colour_s = {SCH_STR, .values = colours, .dflt = "\"red\""};
static const sch label_s = {SCH_STR, SCH_IN(1, 3)};
static const sch flag_s = {SCH_BOOL, .flags = SCH_NULLABLE};
static const sch tags_s = {SCH_ARRAY, SCH_IN(1, 2), .items = &label_s};
static const sch_member range_m[] = {{"min", &count_s, 1}, {"max", &count_s, 1}, {0}};
static const sch range_s = {SCH_OBJECT, .members = range_m};
static const sch *const size_alts[] = {&count_s, &range_s, NULL};
static const sch size_s = {SCH_ONEOF, .alts = size_alts, .msg = "must be a count or {min, max}"};
static const sch circle_t = {SCH_STR, .values = circle_v}, square_t = {SCH_STR, .values = square_v};
static const sch_member circle_m[] = {{"kind", &circle_t, 1}, {"radius", &ratio_s, 1}, {0}};
static const sch_member square_m[] = {{"kind", &square_t, 1}, {"side", &count_s, 0}, {0}};
static const sch circle_s = {SCH_OBJECT, .members = circle_m}, square_s = {SCH_OBJECT, .members = square_m};
static const sch *const shape_alts[] = {&circle_s, &square_s, NULL};
static const sch shape_s = {SCH_ONEOF, .alts = shape_alts, .tag = "kind"};
static const sch extra_s = {SCH_OBJECT, .flags = SCH_LO | SCH_HI | SCH_OPEN, .lo = 1, .hi = 2, .items = &count_s};
static const sch_member doc_m[] = {{"count", &count_s, 1}, {"ratio", &ratio_s, 0}, {"colour", &colour_s, 0},
                                   {"flag", &flag_s, 0},   {"tags", &tags_s, 0},   {"size", &size_s, 0},
                                   {"shape", &shape_s, 0}, {"extra", &extra_s, 0}, {0}};
static const sch doc_s = {SCH_OBJECT, .members = doc_m};
static const sch_member more_m[] = {{"note", &label_s, 0}, {0}};
static const sch more_s = {SCH_OBJECT, .base = &doc_s, .members = more_m};

static void expect(const sch *s, const char *text, const char *want_field, const char *want_msg)
{
    json_error_t e;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &e);
    if (!v) fail_msg("bad test JSON %s: %s", text, e.text);
    char field[128] = "", msg[256] = "";
    int rc = sch_check(s, v, "doc", field, sizeof field, msg, sizeof msg);
    json_decref(v);
    if (!want_field) {
        if (rc != 0) fail_msg("%s: refused at %s: %s", text, field, msg);
        return;
    }
    if (rc != -1 || strcmp(field, want_field) != 0 || strcmp(msg, want_msg) != 0)
        fail_msg("%s: rc %d field '%s' msg '%s'; want '%s' '%s'", text, rc, field, msg, want_field, want_msg);
}

static void test_check(void **state)
{
    (void)state;
    expect(&doc_s, "{\"count\": 3}", NULL, NULL);
    expect(&doc_s, "[]", "doc", "must be an object");
    expect(&doc_s, "{}", "doc.count", "is required: an integer in [1, 64]");
    expect(&doc_s, "{\"count\": 65}", "doc.count", "must be an integer in [1, 64]");
    expect(&doc_s, "{\"count\": 2.0}", "doc.count", "must be an integer in [1, 64]");
    expect(&doc_s, "{\"count\": 1, \"ratio\": 0}", "doc.ratio", "must be a number in (0, 1]");
    expect(&doc_s, "{\"count\": 1, \"ratio\": 1}", NULL, NULL);
    expect(&doc_s, "{\"count\": 1, \"colour\": \"pink\"}", "doc.colour", "must be \"red\", \"green\" or \"blue\"");
    expect(&doc_s, "{\"count\": 1, \"flag\": null}", NULL, NULL);
    expect(&doc_s, "{\"count\": 1, \"flag\": 0}", "doc.flag", "must be true or false");
    /* lengths count characters, not bytes */
    expect(&doc_s, "{\"count\": 1, \"tags\": [\"\u00e9\u00e9\u00e9\"]}", NULL, NULL);
    expect(&doc_s, "{\"count\": 1, \"tags\": [\"ab\", \"abcd\"]}", "doc.tags[1]", "must be a string of 1 to 3 characters");
    expect(&doc_s, "{\"count\": 1, \"tags\": []}", "doc.tags", "must be an array of 1 to 2 items");
    /* alternatives by JSON type; the shape's own message when none fits */
    expect(&doc_s, "{\"count\": 1, \"size\": 8}", NULL, NULL);
    expect(&doc_s, "{\"count\": 1, \"size\": {\"min\": 1}}", "doc.size.max", "is required: an integer in [1, 64]");
    expect(&doc_s, "{\"count\": 1, \"size\": \"big\"}", "doc.size", "must be a count or {min, max}");
    /* alternatives by a tag member */
    expect(&doc_s, "{\"count\": 1, \"shape\": {\"kind\": \"square\"}}", NULL, NULL);
    expect(&doc_s, "{\"count\": 1, \"shape\": {\"kind\": \"circle\"}}", "doc.shape.radius", "is required: a number in (0, 1]");
    expect(&doc_s, "{\"count\": 1, \"shape\": {\"kind\": \"cube\"}}", "doc.shape.kind", "must be \"circle\", \"square\"");
    expect(&doc_s, "{\"count\": 1, \"shape\": {\"kind\": \"square\", \"radius\": 1}}", "doc.shape.radius",
           "unknown field 'radius' (known: kind, side)");
    /* unknown names come first: a misspelling is clearer than a missing member */
    expect(&doc_s, "{\"cuont\": 1}", "doc.cuont",
           "unknown field 'cuont' (known: count, ratio, colour, flag, tags, size, shape, extra)");
    /* open objects: any names, each checked by items; member counts */
    expect(&doc_s, "{\"count\": 1, \"extra\": {\"a\": 1, \"b\": 2}}", NULL, NULL);
    expect(&doc_s, "{\"count\": 1, \"extra\": {\"a\": 0}}", "doc.extra.a", "must be an integer in [1, 64]");
    expect(&doc_s, "{\"count\": 1, \"extra\": {}}", "doc.extra", "must have 1 to 2 members");
    /* a base's members, then the shape's own */
    expect(&more_s, "{\"count\": 1, \"note\": \"hi\"}", NULL, NULL);
    expect(&more_s, "{\"note\": \"hi\"}", "doc.count", "is required: an integer in [1, 64]");
    expect(&more_s, "{\"count\": 1, \"note\": \"long\"}", "doc.note", "must be a string of 1 to 3 characters");
}

static void test_rules_read_well(void **state)
{
    (void)state;
    static const sch pos = {SCH_INT, SCH_MIN(1)}, nonneg = {SCH_INT, SCH_MIN(0)}, above = {SCH_NUM, SCH_ABOVE(0)},
                     half = {SCH_NUM, SCH_IN_HI_OPEN(0, 1)}, big = {SCH_INT, SCH_IN(0, 1e9)};
    expect(&pos, "0", "doc", "must be a positive integer");
    expect(&nonneg, "-1", "doc", "must be a non-negative integer");
    expect(&above, "0", "doc", "must be a positive number");
    expect(&half, "1", "doc", "must be a number in [0, 1)");
    expect(&big, "1000000001", "doc", "must be an integer in [0, 1000000000]");
}

static void test_json_schema(void **state)
{
    (void)state;
    json_t *j = sch_json(&doc_s);
    char *text = json_dumps(j, JSON_SORT_KEYS);
    json_decref(j);
    /* the bounds the checks use, in JSON Schema's words */
    assert_non_null(strstr(text, "\"count\": {\"default\": 4, \"maximum\": 64, \"minimum\": 1, \"type\": \"integer\"}"));
    assert_non_null(strstr(text, "\"ratio\": {\"exclusiveMinimum\": 0.0, \"maximum\": 1.0, \"type\": \"number\"}"));
    assert_non_null(
        strstr(text, "\"colour\": {\"default\": \"red\", \"enum\": [\"red\", \"green\", \"blue\"], \"type\": \"string\"}"));
    assert_non_null(strstr(text, "\"flag\": {\"type\": [\"boolean\", \"null\"]}"));
    assert_non_null(strstr(text, "\"maxLength\": 3, \"minLength\": 1"));
    assert_non_null(strstr(text, "\"kind\": {\"const\": \"circle\", \"type\": \"string\"}"));
    assert_non_null(strstr(text, "\"additionalProperties\": {\"default\": 4"));
    assert_non_null(strstr(text, "\"maxProperties\": 2, \"minProperties\": 1"));
    assert_non_null(strstr(text, "\"required\": [\"count\"]"));
    free(text);
    j = sch_json(&more_s);
    json_t *props = json_object_get(j, "properties");
    assert_non_null(json_object_get(props, "count")); /* the base's */
    assert_non_null(json_object_get(props, "note"));
    assert_true(json_is_false(json_object_get(j, "additionalProperties")));
    json_decref(j);
}

static void test_number_defaults(void **state)
{
    (void)state;
    json_t *v = json_pack("{s:i}", "count", 9);
    assert_true(sch_number(&doc_s, v, "count", -1) == 9);
    json_object_del(v, "count");
    assert_true(sch_number(&doc_s, v, "count", -1) == 4);  /* the documented default */
    assert_true(sch_number(&doc_s, v, "ratio", -1) == -1); /* none documented */
    assert_true(sch_number(&doc_s, NULL, "count", -1) == 4);
    assert_null(sch_member_shape(&doc_s, "nothing"));
    assert_ptr_equal(sch_member_shape(&more_s, "count"), &count_s);
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_rules_read_well),
        cmocka_unit_test(test_json_schema),
        cmocka_unit_test(test_number_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
