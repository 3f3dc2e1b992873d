/* test_limits.c - per-tenant job limits (server/limits.c): parsing a PATCH body, the
 * defaults of migration 0005, storing and reading them, the submission check of epochs, steps
 * and a program's memory, what goes into the task; on a real SQLite file in a temporary directory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/db.h"
#include "server/limits.h"
#include "server/tenants.h"
#include "testpath.h"

static const long long defaults[LIMIT_COUNT] = {86400, 1000, 10000000, 8589934592LL};

static json_t *body(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    return j;
}

static void test_parse(void **state)
{
    (void)state;
    limits_patch p;
    char field[32], msg[160];
    json_t *b = body("{\"max_runtime_s\":3600,\"max_steps\":null,\"weight\":2}");
    assert_int_equal(limits_parse(b, &p, field, sizeof(field), msg, sizeof(msg)), 0);
    assert_true(p.set[LIMIT_RUNTIME] && p.v[LIMIT_RUNTIME] == 3600);
    assert_true(p.set[LIMIT_STEPS] && p.v[LIMIT_STEPS] < 0); /* null: no limit */
    assert_false(p.set[LIMIT_EPOCHS] || p.set[LIMIT_MEMORY]);
    json_decref(b);

    static const char *const bad[][2] = {
        {"{\"max_runtime_s\":-1}", "max_runtime_s"},
        {"{\"max_epochs\":1.5}", "max_epochs"},
        {"{\"max_steps\":\"10\"}", "max_steps"},
        {"{\"max_memory_bytes\":0}", "max_memory_bytes"},
        {"{\"max_memory_bytes\":true}", "max_memory_bytes"},
        {"{\"max_epochs\":100001}", "max_epochs"},
        {"{\"max_runtime_s\":315360001}", "max_runtime_s"},
        {"{\"max_memory_bytes\":1125899906842625}", "max_memory_bytes"},
        {"{\"max_steps\":[1]}", "max_steps"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        b = body(bad[i][0]);
        field[0] = msg[0] = '\0';
        assert_int_equal(limits_parse(b, &p, field, sizeof(field), msg, sizeof(msg)), -1);
        assert_string_equal(field, bad[i][1]);
        assert_non_null(strstr(msg, "must be an integer from 1 to "));
        json_decref(b);
    }
    /* the largest values are accepted */
    b = body("{\"max_runtime_s\":315360000,\"max_epochs\":100000,\"max_steps\":1000000000,\"max_memory_bytes\":1125899906842624}");
    assert_int_equal(limits_parse(b, &p, field, sizeof(field), msg, sizeof(msg)), 0);
    assert_true(p.v[LIMIT_MEMORY] == 1LL << 50);
    json_decref(b);
}

static void test_store_defaults_and_json(void **state)
{
    (void)state;
    char dir[] = "/tmp/gantry-limits-XXXXXX", path[128], err[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/db", dir);
    const char *mig = source_path("migrations");
    sqlite3 *db;
    assert_int_equal(db_open(path, &db, err, sizeof(err)), 0);
    assert_true(db_migrate(db, mig, err, sizeof(err)) >= 5);

    tenant_limits l;
    assert_int_equal(tenants_limits(db, "t_system", &l), 0); /* a tenant from before the migration: the defaults */
    for (int i = 0; i < LIMIT_COUNT; i++)
        assert_true(l.v[i] == defaults[i]);
    assert_int_equal(tenants_limits(db, "t_nope", &l), -1);
    assert_true(l.v[LIMIT_RUNTIME] < 0);

    limits_patch p;
    char field[32], msg[160];
    json_t *b = body("{\"max_runtime_s\":2,\"max_memory_bytes\":null}");
    assert_int_equal(limits_parse(b, &p, field, sizeof(field), msg, sizeof(msg)), 0);
    json_decref(b);
    assert_int_equal(tenants_set_limits(db, "t_system", &p), 0);
    assert_int_equal(tenants_limits(db, "t_system", &l), 0);
    assert_true(l.v[LIMIT_RUNTIME] == 2 && l.v[LIMIT_EPOCHS] == 1000 && l.v[LIMIT_STEPS] == 10000000 && l.v[LIMIT_MEMORY] < 0);

    json_t *o = json_object();
    limits_to_json(&l, o);
    assert_int_equal(json_integer_value(json_object_get(o, "max_runtime_s")), 2);
    assert_int_equal(json_integer_value(json_object_get(o, "max_epochs")), 1000);
    assert_true(json_is_null(json_object_get(o, "max_memory_bytes")));
    json_decref(o);

    task_msg t;
    memset(&t, 0, sizeof(t));
    limits_to_task(&l, &t);
    assert_true(t.max_runtime_s == 2 && t.max_memory_bytes == 0);

    db_close(db);
    unlink(path);
    char side[160];
    snprintf(side, sizeof(side), "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof(side), "%s-shm", path);
    unlink(side);
    rmdir(dir);
}

static void test_check_spec(void **state)
{
    (void)state;
    tenant_limits l = {{86400, 5, 500, 1 << 30}};
    char field[32], msg[256];
    json_t *s = body("{\"epochs\":6}");
    assert_int_equal(limits_check_spec(&l, "training", s, field, sizeof(field), msg, sizeof(msg)), -1);
    assert_string_equal(field, "spec.epochs");
    assert_non_null(strstr(msg, "epochs 6 is over your tenant's limit of 5 epochs per job (max_epochs"));
    json_decref(s);
    s = body("{\"epochs\":5}");
    assert_int_equal(limits_check_spec(&l, "training", s, field, sizeof(field), msg, sizeof(msg)), 0);
    json_decref(s);
    s = body("{\"steps\":501}");
    assert_int_equal(limits_check_spec(&l, "training", s, field, sizeof(field), msg, sizeof(msg)), -1);
    assert_string_equal(field, "spec.steps");
    assert_non_null(strstr(msg, "limit of 500 steps"));
    json_decref(s);
    s = body("{\"rounds\":13,\"local_steps\":40}"); /* 520 steps per site */
    assert_int_equal(limits_check_spec(&l, "federated", s, field, sizeof(field), msg, sizeof(msg)), -1);
    assert_string_equal(field, "spec.rounds");
    assert_non_null(strstr(msg, "520"));
    json_decref(s);
    s = body("{\"rounds\":100000,\"local_steps\":1000000}"); /* 1e11: no overflow */
    l.v[LIMIT_STEPS] = 1000000000;
    assert_int_equal(limits_check_spec(&l, "federated", s, field, sizeof(field), msg, sizeof(msg)), -1);
    l.v[LIMIT_STEPS] = -1; /* no limit */
    assert_int_equal(limits_check_spec(&l, "federated", s, field, sizeof(field), msg, sizeof(msg)), 0);
    json_decref(s);
    /* a program's ranks: memory_mb against max_memory_bytes (1 GiB here); absent: the tenant's */
    s = body("{\"program\":{\"command\":[\"python3\"],\"workdir\":\"w\"},\"resources\":{\"memory_mb\":1025}}");
    assert_int_equal(limits_check_spec(&l, "training", s, field, sizeof(field), msg, sizeof(msg)), -1);
    assert_string_equal(field, "spec.resources.memory_mb");
    assert_non_null(strstr(msg, "1074790400 is over your tenant's limit of 1073741824 bytes"));
    assert_non_null(strstr(msg, "(max_memory_bytes;"));
    json_object_set_new(json_object_get(s, "resources"), "memory_mb", json_integer(1024));
    assert_int_equal(limits_check_spec(&l, "training", s, field, sizeof(field), msg, sizeof(msg)), 0);
    json_object_del(s, "resources");
    assert_int_equal(limits_check_spec(&l, "training", s, field, sizeof(field), msg, sizeof(msg)), 0);
    json_object_set_new(s, "resources", json_pack("{s:i}", "memory_mb", 1 << 20));
    l.v[LIMIT_MEMORY] = -1; /* no limit */
    assert_int_equal(limits_check_spec(&l, "training", s, field, sizeof(field), msg, sizeof(msg)), 0);
    json_decref(s);
    s = body("{\"epochs\":100000}");
    l.v[LIMIT_EPOCHS] = -1;
    assert_int_equal(limits_check_spec(&l, "training", s, field, sizeof(field), msg, sizeof(msg)), 0);
    assert_int_equal(limits_check_spec(&l, "placement", s, field, sizeof(field), msg, sizeof(msg)), 0);
    json_decref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_store_defaults_and_json),
        cmocka_unit_test(test_check_spec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
