/* Routing: patterns with {params}, and the route table's own consistency. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "server/http.h"
#include "server/routes.h"

static int matches(const char *pattern, const char *path, h2o_iovec_t *params)
{
    return route_match(pattern, h2o_iovec_init(path, strlen(path)), params);
}

static void test_literal_paths(void **state)
{
    (void)state;
    h2o_iovec_t p[2];
    assert_true(matches("/v1/jobs", "/v1/jobs", p));
    assert_false(matches("/v1/jobs", "/v1/jobs/", p));
    assert_false(matches("/v1/jobs", "/v1/job", p));
    assert_false(matches("/v1/jobs", "/v1/jobsx", p));
}

static void test_params(void **state)
{
    (void)state;
    h2o_iovec_t p[2] = {{0}};
    assert_true(matches("/v1/jobs/{id}/cancel", "/v1/jobs/j_42/cancel", p));
    assert_int_equal(p[0].len, 4);
    assert_memory_equal(p[0].base, "j_42", 4);
    assert_false(matches("/v1/jobs/{id}", "/v1/jobs/", p));    /* an empty segment is not an id */
    assert_false(matches("/v1/jobs/{id}", "/v1/jobs/a/b", p)); /* one segment only */
    assert_false(matches("/v1/jobs/{id}/cancel", "/v1/jobs/x/events", p));
    assert_true(matches("/v1/tenants/{id}/tokens", "/v1/tenants/t_1/tokens", p));
    assert_memory_equal(p[0].base, "t_1", 3);
}

/* {name*} at the end of a pattern: the rest of the path, '/' included, never empty */
static void test_rest_param(void **state)
{
    (void)state;
    h2o_iovec_t p[2] = {{0}};
    const char *pat = "/v1/jobs/{id}/outputs/{path*}";
    assert_true(matches(pat, "/v1/jobs/j_1/outputs/sub/dir/model.pt", p));
    assert_memory_equal(p[0].base, "j_1", 3);
    assert_int_equal(p[1].len, strlen("sub/dir/model.pt"));
    assert_memory_equal(p[1].base, "sub/dir/model.pt", p[1].len);
    assert_true(matches(pat, "/v1/jobs/j_1/outputs/a", p));
    assert_false(matches(pat, "/v1/jobs/j_1/outputs/", p));
    assert_false(matches(pat, "/v1/jobs/j_1/outputs", p));
    assert_false(matches(pat, "/v1/jobs/j_1/outputs/a\x01b", p)); /* a control byte */
    assert_false(matches("/v1/jobs/{id}/outputs", "/v1/jobs/j_1/outputs/a", p));
}

static void test_route_table(void **state)
{
    (void)state;
    assert_true(routes_count >= 14);
    for (int i = 0; i < routes_count; i++) {
        assert_non_null(routes[i].fn);
        assert_true(routes[i].pattern[0] == '/');
        /* probes and the API description are open, everything else under /v1 needs a token */
        if (strncmp(routes[i].pattern, "/v1/", 4) == 0 && strcmp(routes[i].pattern, "/v1/openapi.json") != 0)
            assert_true(routes[i].role >= ROLE_VIEWER);
        for (int j = 0; j < i; j++) /* no two routes with the same method and pattern */
            assert_false(strcmp(routes[i].method, routes[j].method) == 0 && strcmp(routes[i].pattern, routes[j].pattern) == 0);
    }
}

static void test_json_depth(void **state)
{
    (void)state;
    assert_int_equal(http_json_depth("{}", 2), 1);
    assert_int_equal(http_json_depth("{\"a\":[[1]]}", 11), 3);
    assert_int_equal(http_json_depth("{\"a\":\"[[[[\"}", 12), 1);
    assert_int_equal(http_json_depth("{\"a\":\"\\\"[[\"}", 13), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_literal_paths), cmocka_unit_test(test_params),     cmocka_unit_test(test_rest_param),
        cmocka_unit_test(test_route_table),   cmocka_unit_test(test_json_depth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
