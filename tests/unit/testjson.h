/* testjson.h - J("{'units': 64}"): a JSON value written with ' for " (any value, not only objects),
 * for the unit tests; a test fails with the position when the text is not JSON.  Include after
 * <cmocka.h>. */
#ifndef GANTRY_TESTJSON_H
#define GANTRY_TESTJSON_H

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static inline json_t *J(const char *text)
{
    char *s = strdup(text);
    assert_non_null(s);
    for (char *p = s; *p; p++)
        if (*p == '\'') *p = '"';
    json_error_t err;
    json_t *j = json_loads(s, JSON_DECODE_ANY, &err);
    if (!j) fail_msg("bad test JSON at %d:%d: %s\n%s", err.line, err.column, err.text, s);
    free(s);
    return j;
}

#endif
