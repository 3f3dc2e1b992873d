/* api_openapi.c - GET /v1/openapi.json, generated from the route table (routes.c):
 * every path and method, its summary, the role it needs (x-gantry-role) and its
 * error shape.  Tests enumerate routes from it, so a new route is covered at once.
 * The job submission's schemas are written from the shapes the server validates
 * with (spec.c, common/schema.h). */
#include "server/api.h"
#include "server/spec.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static json_t *error_schema(void)
{
    return json_pack("{s:s, s:{s:{s:s, s:{s:{s:s}, s:{s:s}, s:{s:[ss]}}, s:[sss]}}, s:[s]}", "type", "object", "properties",
                     "error", "type", "object", "properties", "code", "type", "string", "message", "type", "string", "field",
                     "type", "string", "null", "required", "code", "message", "field", "required", "error");
}

/* request bodies with a schema in components (the rest: any object) */
static const struct {
    const char *method, *pattern, *schema;
} bodies[] = {{"POST", "/v1/jobs", "JobSubmission"}};

static json_t *body_schema(const route *r)
{
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++)
        if (!strcmp(bodies[i].method, r->method) && !strcmp(bodies[i].pattern, r->pattern)) {
            char ref[96];
            snprintf(ref, sizeof ref, "#/components/schemas/%s", bodies[i].schema);
            return json_pack("{s:s}", "$ref", ref);
        }
    return json_pack("{s:s}", "type", "object");
}

static json_t *operation(const route *r)
{
    json_t *op = json_pack("{s:s, s:s, s:{s:{s:s}}}", "summary", r->summary, "x-gantry-role", role_name(r->role), "responses",
                           "default", "description", "an error: {\"error\":{\"code\",\"message\",\"field\"}}");
    json_object_set_new(json_object_get(json_object_get(op, "responses"), "default"), "content",
                        json_pack("{s:{s:{s:s}}}", "application/json", "schema", "$ref", "#/components/schemas/Error"));
    json_object_set_new(json_object_get(op, "responses"), "2XX", json_pack("{s:s}", "description", "success"));
    if (r->role != ROLE_NONE) json_object_set_new(op, "security", json_pack("[{s:[]}]", "bearer"));
    json_t *params = json_array();
    for (const char *p = strchr(r->pattern, '{'); p; p = strchr(p + 1, '{')) {
        const char *end = strchr(p, '}');
        bool rest = end[-1] == '*'; /* {name*}: the rest of the path (http.h) */
        json_t *param = json_pack("{s:s%, s:s, s:b, s:{s:s}}", "name", p + 1, (size_t)(end - p - 1 - rest), "in", "path",
                                  "required", 1, "schema", "type", "string");
        if (rest) json_object_set_new(param, "description", json_string("the rest of the path: may hold '/'"));
        json_array_append_new(params, param);
    }
    if (json_array_size(params))
        json_object_set_new(op, "parameters", params);
    else
        json_decref(params);
    if (r->body == BODY_UPLOAD) /* a model file and its metadata (server/api_models.c, spec/serve_signature.h) */
        json_object_set_new(op, "requestBody",
                            json_pack("{s:b, s:{s:{s:{s:s, s:[s,s], s:{s:{s:s, s:s}, s:{s:s, s:s}, s:{s:s, s:s}}}}}}", "required",
                                      1, "content", "multipart/form-data", "schema", "type", "object", "required", "file",
                                      "metadata", "properties", "file", "type", "string", "format", "binary", "metadata", "type",
                                      "string", "description",
                                      "JSON {inputs:[{name, datatype, shape:[-1,...]}], outputs?, description?, metrics?} "
                                      "(docs/inference.md)",
                                      "sha256", "type", "string", "description",
                                      "optional: the file's SHA-256 (64 hex digits); a file that differs is refused (400)"));
    else if (r->body != BODY_NONE)
        json_object_set_new(op, "requestBody",
                            json_pack("{s:b, s:{s:{s:o}}}", "required",
                                      strcmp(r->method, "POST") == 0 && strstr(r->pattern, "cancel") == NULL, "content",
                                      "application/json", "schema", body_schema(r)));
    return op;
}

void api_openapi(http_ctx *c)
{
    json_t *paths = json_object();
    for (int i = 0; i < c->srv->routes_count; i++) {
        char path[256];
        size_t k = 0;
        for (const char *p = c->srv->routes[i].pattern; *p && k + 1 < sizeof(path); p++)
            if (!(p[0] == '*' && p[1] == '}')) path[k++] = *p; /* {name*} is {name} in OpenAPI's templates */
        path[k] = '\0';
        json_t *item = json_object_get(paths, path);
        if (!item) {
            item = json_object();
            json_object_set_new(paths, path, item);
        }
        char method[16];
        size_t n = strlen(c->srv->routes[i].method);
        for (size_t k = 0; k <= n && k < sizeof(method); k++)
            method[k] = (char)(c->srv->routes[i].method[k] | 0x20);
        method[n] = '\0';
        json_object_set_new(item, method, operation(&c->srv->routes[i]));
    }
    json_t *schemas = spec_job_schemas();
    json_object_set_new(schemas, "Error", error_schema());
    json_t *doc = json_pack("{s:s, s:{s:s, s:s, s:s}, s:o, s:{s:o, s:{s:{s:s, s:s}}}}", "openapi", "3.1.0", "info", "title",
                            "gantry", "version", "0.1.0", "description",
                            "Multi-tenant ML operations service. Every route except the probes needs "
                            "'Authorization: Bearer <token>'.",
                            "paths", paths, "components", "schemas", schemas, "securitySchemes", "bearer", "type", "http", "scheme",
                            "bearer");
    http_reply_json(c, 200, doc);
}
