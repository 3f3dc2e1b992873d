/* The model registry: versions per name, one model per job, tenant-scoped reads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/db.h"
#include "server/models.h"
#include "testpath.h"

static sqlite3 *open_db(char *dir)
{
    snprintf(dir, 64, "/tmp/gantry-models-XXXXXX");
    assert_non_null(mkdtemp(dir));
    char path[128], err[256];
    snprintf(path, sizeof(path), "%s/t.db", dir);
    sqlite3 *db;
    assert_int_equal(db_open(path, &db, err, sizeof(err)), 0);
    const char *mig = source_path("migrations");
    assert_true(db_migrate(db, mig, err, sizeof(err)) >= 3);
    assert_int_equal(db_exec(db, "INSERT INTO tenants (id, name, created_at) VALUES ('t_a', 'a', 0), ('t_b', 'b', 0);"
                                 "INSERT INTO jobs (id, tenant_id, type, name, priority, state, spec, created_at, "
                                 "updated_at) VALUES "
                                 "('j1', 't_a', 'training', 'mnist', 1, 'succeeded', '{}', 0, 0),"
                                 "('j2', 't_a', 'training', 'other', 1, 'succeeded', '{\"model_name\":\"mnist\"}', 0, 0),"
                                 "('j3', 't_a', 'placement', 'plan', 1, 'succeeded', '{}', 0, 0)"),
                     0);
    return db;
}

static void test_versions_and_scope(void **state)
{
    (void)state;
    char dir[64];
    sqlite3 *db = open_db(dir);
    json_t *result = json_pack("{s:{s:f}, s:{s:{s:i}, s:s}}", "metrics", "test_accuracy", 0.88, "model", "architecture", "layers",
                               3, "artifact", "/models/j1.model");
    assert_int_equal(models_register(db, "j1", result), 0);
    assert_int_equal(models_register(db, "j1", result), 0); /* a replayed event registers nothing new */
    assert_int_equal(models_register(db, "j2", result), 0); /* spec.model_name wins over the job name */
    assert_int_equal(models_register(db, "j3", result), 0); /* placement jobs have no model */
    json_t *m = models_get_json(db, "t_a", "mnist");
    assert_non_null(m);
    json_t *versions = json_object_get(m, "versions");
    assert_int_equal(json_array_size(versions), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(versions, 0), "version")), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(versions, 1), "job_id")), "j1");
    assert_null(models_get_json(db, "t_b", "mnist")); /* another tenant's model does not exist */
    json_t *list = models_list_json(db, "t_a");
    assert_int_equal(json_array_size(json_object_get(list, "models")), 1);
    json_decref(list);
    json_decref(m);
    json_decref(result);
    db_close(db);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* a search's trial registers nothing itself; its search registers the chosen trial's output under the
 * search's name (models_register_as), the version's job and metrics the trial's */
static void test_search_registers_its_trial(void **state)
{
    (void)state;
    char dir[64];
    sqlite3 *db = open_db(dir);
    assert_int_equal(db_exec(db, "INSERT INTO jobs (id, tenant_id, type, name, priority, state, spec, created_at, updated_at) "
                                 "VALUES ('j_s', 't_a', 'training', 'tune', 1, 'running', '{\"model_name\":\"tuned\","
                                 "\"search\":{}}', 0, 0), ('j_t', 't_a', 'training', 'tune trial 3', 1, 'succeeded', "
                                 "'{\"model_name\":\"tuned\",\"trial\":{\"search\":\"j_s\",\"index\":3}}', 0, 0)"),
                     0);
    json_t *result = json_pack("{s:{s:f}, s:{s:s, s:{s:s, s:b}, s:s}, s:{s:[{s:s, s:i, s:s}]}}", "metrics", "acc", 0.9, "model",
                               "artifact", "/w/jobs/j_t/out/m.pt", "architecture", "format", "torchscript", "program", 1, "output",
                               "m.pt", "outputs", "files", "path", "m.pt", "bytes", 7, "sha256", "ab12");
    assert_int_equal(models_register(db, "j_t", result), 0); /* its own success: nothing */
    assert_null(models_get_json(db, "t_a", "tuned"));
    assert_null(models_get_json(db, "t_a", "tune trial 3"));
    char name[64];
    int version = -1;
    assert_int_equal(models_register_as(db, "j_t", "j_s", result, name, sizeof name, &version), 0);
    assert_string_equal(name, "tuned");
    assert_int_equal(version, 1);
    version = -1; /* again (a replayed event): the same version, nothing new */
    assert_int_equal(models_register_as(db, "j_t", "j_s", result, name, sizeof name, &version), 0);
    assert_int_equal(version, 1);
    json_t *m = models_get_json(db, "t_a", "tuned");
    assert_non_null(m);
    json_t *versions = json_object_get(m, "versions"), *v = json_array_get(versions, 0);
    assert_int_equal(json_array_size(versions), 1);
    assert_string_equal(json_string_value(json_object_get(v, "job_id")), "j_t");
    assert_string_equal(json_string_value(json_object_get(v, "format")), "torchscript");
    assert_string_equal(json_string_value(json_object_get(v, "sha256")), "ab12");
    assert_int_equal(json_integer_value(json_object_get(v, "size_bytes")), 7);
    assert_true(json_real_value(json_object_get(json_object_get(v, "metrics"), "acc")) == 0.9);
    /* without a model in the result: nothing, version 0 */
    json_t *bare = json_pack("{s:{}}", "metrics");
    assert_int_equal(models_register_as(db, "j1", "j_s", bare, name, sizeof name, &version), 0);
    assert_int_equal(version, 0);
    json_decref(bare);
    json_decref(m);
    json_decref(result);
    db_close(db);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_versions_and_scope),
                                       cmocka_unit_test(test_search_registers_its_trial)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
