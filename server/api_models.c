/* api_models.c - the model registry's routes: list, show, upload a TorchScript version, aliases.
 *
 * Upload (POST /v1/models/{name}/versions, multipart/form-data with parts `file` and `metadata`, and
 * optionally `sha256`: the file's digest as the client computed it, refused with 400 when it differs):
 * the head was checked by the gate (role, size under model-upload-limit) before any body byte;
 * here, on the loop, the parts and the metadata (spec/serve_signature.h); then, on libuv's
 * thread pool (a 45 MB ResNet-18 takes ~0.2 s to check and hash), the archive is checked
 * (server/tsarchive.h: a TorchScript ZIP with its CRCs right), hashed (SHA-256) and written to the
 * model store as <store>/<tenant>/u_<random>.pt (a temporary name, fsync, rename, the directory
 * fsynced); back on the loop the next version is inserted through the store.  Nothing is
 * stored for a refused upload: the checks come before the file is written, and a file whose row
 * did not commit is removed.
 *
 * The whole body is in memory (h2o 2.2.5 hands a handler the complete body); the file part is
 * copied once for the thread pool, because a client that hangs up frees the request's memory. */
#include "common/alloc.h"
#include "common/ids.h"
#include "common/log.h"
#include "server/api.h"
#include "server/audit.h"
#include "server/bus.h"
#include "server/models.h"
#include "server/multipart.h"
#include "server/sse.h"
#include "server/store.h"
#include "server/tsarchive.h"
#include "spec/serve_signature.h"
#include "spec/serve_spec.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UPLOAD_MAX_PARTS 8
#define MODEL_NAME_MAX 128

void api_models(http_ctx *c)
{
    json_t *out = models_list_json(c->srv->db, c->auth.tenant_id);
    if (!out) {
        http_error(c, GERR_INTERNAL, NULL, "database error");
        return;
    }
    http_reply_json(c, 200, out);
}

void api_model_get(http_ctx *c)
{
    json_t *out = models_get_json(c->srv->db, c->auth.tenant_id, http_param(c, 0));
    if (!out) {
        http_error(c, GERR_NOT_FOUND, "name", "no model with this name");
        return;
    }
    http_reply_json(c, 200, out);
}

/* a new model's name: 1..128 of [A-Za-z0-9_.-], starting with a letter or digit (no '@': it
 * separates an alias, no '/': it is a path segment) */
static bool name_valid(const char *name)
{
    size_t n = strlen(name);
    const char *ok = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
    return n >= 1 && n <= MODEL_NAME_MAX && strchr(ok, name[0]) && name[0] != '.' && name[0] != '-' && name[0] != '_' &&
           strspn(name, ok) == n;
}

/* ---- upload ---- */

typedef struct {
    server *srv;
    http_defer *defer;
    char tenant[48], token_id[48], name[MODEL_NAME_MAX + 1];
    unsigned char *file; /* a copy of the file part, freed by the thread's caller */
    size_t len;
    json_t *signature, *metrics;
    char *description;
    char expect[65]; /* the part 'sha256' in lowercase, or empty */
    /* the thread's answer */
    char dir[4096], path[4200], sha256[65];
    char err[300];
    const char *err_field; /* the field of a 400 */
    int status;            /* 0 written; else the HTTP error class: 400 (the file) or 500 */
    int version;
    uv_work_t work;
} upload_op;

static void upload_free(upload_op *op)
{
    free(op->file);
    json_decref(op->signature);
    json_decref(op->metrics);
    free(op->description);
    http_defer_end(op->defer);
    free(op);
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

/* on the thread pool: check, hash, write */
static void upload_work(uv_work_t *w)
{
    upload_op *op = w->data;
    op->err_field = "file";
    if (tsarchive_check(op->file, op->len, op->err, sizeof(op->err)) != 0) {
        op->status = 400;
        return;
    }
    unsigned char md[32];
    unsigned int mdlen = 0;
    EVP_Digest(op->file, op->len, md, &mdlen, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        snprintf(op->sha256 + 2 * i, 3, "%02x", md[i]);
    if (op->expect[0] && strcmp(op->expect, op->sha256) != 0) {
        snprintf(op->err, sizeof(op->err), "the file's SHA-256 is %s, not the %s the part 'sha256' gives: it changed on the way",
                 op->sha256, op->expect);
        op->err_field = "sha256";
        op->status = 400;
        return;
    }
    char id[48], tmp[4300];
    if (mkdir(op->dir, 0700) != 0 && errno != EEXIST) goto io_error;
    if (id_random("u", 10, id, sizeof(id)) != 0) goto io_error;
    snprintf(op->path, sizeof(op->path), "%s/%s.pt", op->dir, id);
    snprintf(tmp, sizeof(tmp), "%s.partial", op->path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) goto io_error;
    if (write_all(fd, op->file, op->len) != 0 || fsync(fd) != 0 || close(fd) != 0 || rename(tmp, op->path) != 0) {
        if (fd >= 0) close(fd);
        unlink(tmp);
        goto io_error;
    }
    int dfd = open(op->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* the rename durable before the row says so */
    if (dfd >= 0) fsync(dfd), close(dfd);
    op->status = 0;
    return;
io_error:
    snprintf(op->err, sizeof(op->err), "cannot write to the model store: %s", strerror(errno));
    op->path[0] = '\0';
    op->status = 500;
}

static int apply_upload(sqlite3 *db, void *arg)
{
    upload_op *op = arg;
    model_upload u = {.tenant_id = op->tenant,
                      .name = op->name,
                      .artifact = op->path,
                      .sha256 = op->sha256,
                      .description = op->description,
                      .size_bytes = (int64_t)op->len,
                      .signature = op->signature,
                      .metrics = op->metrics};
    if (models_add_upload(db, &u, &op->version) != 0) return -1;
    char detail[300];
    snprintf(detail, sizeof(detail), "%s v%d sha256:%s", op->name, op->version, op->sha256);
    return audit_record(db, op->token_id, "model.upload", detail);
}

static void upload_done(void *arg, int ok)
{
    upload_op *op = arg;
    http_ctx *c = http_defer_ctx(op->defer);
    if (!ok) {
        unlink(op->path); /* no row names it */
        if (c) http_error(c, GERR_INTERNAL, NULL, "could not record the model version");
    } else {
        log_info("model %s v%d uploaded by token %s (%zu bytes, sha256 %s)", op->name, op->version, op->token_id, op->len,
                 op->sha256);
        if (c) {
            json_t *all = models_get_json(op->srv->db, op->tenant, op->name), *mine = NULL, *v;
            size_t i;
            json_array_foreach(json_object_get(all, "versions"), i,
                               v) if (json_integer_value(json_object_get(v, "version")) == op->version) mine = v;
            json_t *body = mine ? json_pack("{s:s, s:O}", "name", op->name, "version", json_object_get(mine, "version")) : NULL;
            if (body) json_object_update(body, mine);
            json_decref(all);
            if (body)
                http_reply_json(c, 201, body);
            else
                http_error(c, GERR_INTERNAL, NULL, "the version was recorded but cannot be read back");
        }
    }
    upload_free(op);
}

static void upload_after(uv_work_t *w, int status)
{
    upload_op *op = w->data;
    (void)status;
    free(op->file); /* written or refused: the copy is no longer needed */
    op->file = NULL;
    http_ctx *c = http_defer_ctx(op->defer);
    if (op->status != 0) {
        if (op->status == 500) log_error("model upload %s: %s", op->name, op->err);
        if (c)
            http_error(c, op->status == 400 ? GERR_INVALID_FIELD : GERR_INTERNAL, op->status == 400 ? op->err_field : NULL, "%s",
                       op->err);
        upload_free(op);
        return;
    }
    store_submit(op->srv->store, apply_upload, upload_done, op);
}

/* the part 'sha256': 64 hexadecimal digits (a trailing newline allowed), into out in lowercase; -1 otherwise */
static int sha256_part(const mp_part *p, char out[65])
{
    size_t n = p->len;
    while (n > 0 && (p->data[n - 1] == '\n' || p->data[n - 1] == '\r'))
        n--;
    if (n != 64) return -1;
    for (size_t i = 0; i < 64; i++) {
        char ch = (char)p->data[i];
        if (ch >= 'A' && ch <= 'F') ch = (char)(ch - 'A' + 'a');
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return -1;
        out[i] = ch;
    }
    out[64] = '\0';
    return 0;
}

void api_model_upload(http_ctx *c)
{
    const char *name = http_param(c, 0);
    if (!name_valid(name)) {
        http_error(c, GERR_INVALID_FIELD, "name",
                   "a model name is 1 to %d letters, digits, '_', '.' or '-', starting with a letter or digit", MODEL_NAME_MAX);
        return;
    }
    mp_part parts[UPLOAD_MAX_PARTS];
    int n = 0;
    char msg[300];
    if (multipart_parse(http_header(c, "content-type"), c->req->entity.base, c->req->entity.len, parts, UPLOAD_MAX_PARTS, &n, msg,
                        sizeof(msg)) != 0) {
        http_error(c, GERR_BAD_REQUEST, NULL, "%s", msg);
        return;
    }
    for (int i = 0; i < n; i++) /* (a name twice is the parser's refusal) */
        if (strcmp(parts[i].name, "file") != 0 && strcmp(parts[i].name, "metadata") != 0 && strcmp(parts[i].name, "sha256") != 0) {
            http_error(c, GERR_BAD_REQUEST, parts[i].name,
                       "unknown part '%s': send the parts 'file' and 'metadata' (and optionally 'sha256')", parts[i].name);
            return;
        }
    const mp_part *file = multipart_find(parts, n, "file"), *meta = multipart_find(parts, n, "metadata");
    if (!file || file->len == 0) {
        http_error(c, GERR_INVALID_FIELD, "file", "send the TorchScript file as the part 'file' (torch.jit.save's output)");
        return;
    }
    if (!meta) {
        http_error(c, GERR_INVALID_FIELD, "metadata",
                   "send the part 'metadata': JSON {\"inputs\":[{\"name\",\"datatype\",\"shape\":[-1,...]}], \"outputs\"?, "
                   "\"description\"?, \"metrics\"?}");
        return;
    }
    char expect[65] = "";
    const mp_part *digest = multipart_find(parts, n, "sha256");
    if (digest && sha256_part(digest, expect) != 0) {
        http_error(c, GERR_INVALID_FIELD, "sha256", "the part 'sha256' must be the file's SHA-256: 64 hexadecimal digits");
        return;
    }
    json_error_t jerr;
    json_t *metadata = json_loadb(meta->data, meta->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!metadata) {
        http_error(c, GERR_INVALID_JSON, "metadata", "the part 'metadata' is not valid JSON: %s", jerr.text);
        return;
    }
    model_sig sig;
    char field[128];
    if (sig_parse(metadata, &sig, field, sizeof(field), msg, sizeof(msg)) != 0) {
        json_decref(metadata);
        http_error(c, GERR_INVALID_FIELD, field, "%s", msg);
        return;
    }
    upload_op *op = xcalloc(1, sizeof(*op));
    op->srv = c->srv;
    snprintf(op->tenant, sizeof(op->tenant), "%s", c->auth.tenant_id);
    snprintf(op->token_id, sizeof(op->token_id), "%s", c->auth.token_id);
    snprintf(op->name, sizeof(op->name), "%s", name);
    snprintf(op->expect, sizeof(op->expect), "%s", expect);
    snprintf(op->dir, sizeof(op->dir), "%s/%s", c->srv->model_store, c->auth.tenant_id);
    op->signature = sig_to_json(&sig);
    op->metrics = json_incref(json_object_get(metadata, "metrics"));
    op->description = xstrdup(json_string_value(json_object_get(metadata, "description")) ?: "");
    json_decref(metadata);
    op->file = xmalloc(file->len);
    memcpy(op->file, file->data, file->len);
    op->len = file->len;
    op->defer = http_defer_begin(c);
    op->work.data = op;
    uv_queue_work(c->srv->loop, &op->work, upload_work, upload_after);
}

/* ---- aliases ---- */

typedef struct {
    server *srv;
    http_defer *defer;
    char tenant[48], token_id[48], name[256], alias[SERVE_ALIAS_MAX + 1], job_id[48];
    int version, previous, rc;
    json_t *rolled;
    bool del;
} alias_op;

static int apply_alias(sqlite3 *db, void *arg)
{
    alias_op *op = arg;
    op->rc = op->del ? models_alias_delete(db, op->tenant, op->name, op->alias, op->job_id)
                     : models_alias_set(db, op->tenant, op->name, op->alias, op->version, &op->previous, &op->rolled);
    if (op->rc != 0) return op->rc < 0 ? -1 : 0;
    char detail[400];
    snprintf(detail, sizeof(detail), "%s@%s%s%d", op->name, op->alias, op->del ? "" : " -> v", op->del ? 0 : op->version);
    return audit_record(db, op->token_id, op->del ? "model.alias.delete" : "model.alias.set", detail);
}

static void alias_done(void *arg, int ok)
{
    alias_op *op = arg;
    http_ctx *c = http_defer_ctx(op->defer);
    json_t *jobs = json_array();
    size_t i;
    json_t *r;
    json_array_foreach(op->rolled, i, r)
    { /* durable now: the replicas may switch (workers/exec_infer.c) */
        const char *job = json_string_value(json_object_get(r, "job_id"));
        char *text = json_dumps(json_object_get(r, "resolved"), JSON_COMPACT);
        if (ok && text) {
            bus_set_model(op->srv->bus, job, text);
            char ev[400];
            snprintf(ev, sizeof(ev),
                     "{\"job_id\":\"%s\",\"state\":null,\"reason\":\"model %s@%s: version %d -> %d\",\"source\":\"server\"}", job,
                     op->name, op->alias, op->previous, op->version);
            sse_publish(op->srv->sse, op->tenant, "job", ev);
            json_array_append_new(jobs, json_string(job));
        }
        free(text);
    }
    if (c) {
        if (!ok)
            http_error(c, GERR_INTERNAL, NULL, "database error");
        else if (op->rc == MODELS_UNKNOWN && op->del)
            http_error(c, GERR_NOT_FOUND, "alias", "model '%s' has no alias '%s'", op->name, op->alias);
        else if (op->rc == MODELS_UNKNOWN)
            http_error(c, GERR_INVALID_FIELD, "version", "model '%s' has no version %d", op->name, op->version);
        else if (op->rc == MODELS_NO_SIGNATURE)
            http_error(c, GERR_INVALID_FIELD, "version",
                       "version %d of '%s' has no inputs and outputs declared, and a job serves %s@%s: it could not serve it",
                       op->version, op->name, op->name, op->alias);
        else if (op->rc == MODELS_IN_USE)
            http_error(c, GERR_CONFLICT, "alias", "inference job %s serves %s@%s: move the alias, or cancel the job, first",
                       op->job_id, op->name, op->alias);
        else if (op->del)
            http_reply_json(c, 200, json_pack("{s:s, s:s, s:b}", "name", op->name, "alias", op->alias, "deleted", 1));
        else
            http_reply_json(c, 200,
                            json_pack("{s:s, s:s, s:i, s:o, s:O}", "name", op->name, "alias", op->alias, "version", op->version,
                                      "previous", op->previous > 0 ? json_integer(op->previous) : json_null(), "rolled", jobs));
    }
    json_decref(jobs);
    json_decref(op->rolled);
    http_defer_end(op->defer);
    free(op);
}

static void alias_submit(http_ctx *c, bool del)
{
    const char *name = http_param(c, 0), *alias = http_param(c, 1);
    if (!serve_alias_valid(alias)) {
        http_error(c, GERR_INVALID_FIELD, "alias",
                   "an alias is a letter, then up to %d letters, digits, '_' or '-' (e.g. production)", SERVE_ALIAS_MAX - 1);
        return;
    }
    json_t *version = del ? NULL : json_object_get(c->body, "version");
    if (!del && (!json_is_integer(version) || json_integer_value(version) < 1 || json_integer_value(version) > 1000000000 ||
                 json_object_size(c->body) != 1)) {
        http_error(c, GERR_INVALID_FIELD, "version", "send {\"version\": N}: a version of the model (GET /v1/models/%s lists them)",
                   name);
        return;
    }
    if (!del && !bus_ready(c->srv->bus)) { /* the replicas could not be told: nothing moves */
        http_add_header(c, "retry-after", "1");
        http_error(c, GERR_UNAVAILABLE, NULL, "Redis is unreachable: the serving jobs could not be told; retry");
        return;
    }
    alias_op *op = xcalloc(1, sizeof(*op));
    op->srv = c->srv;
    op->del = del;
    op->version = del ? 0 : (int)json_integer_value(version);
    snprintf(op->tenant, sizeof(op->tenant), "%s", c->auth.tenant_id);
    snprintf(op->token_id, sizeof(op->token_id), "%s", c->auth.token_id);
    snprintf(op->name, sizeof(op->name), "%s", name);
    snprintf(op->alias, sizeof(op->alias), "%s", alias);
    op->defer = http_defer_begin(c);
    store_submit(c->srv->store, apply_alias, alias_done, op);
}

void api_model_alias_put(http_ctx *c)
{
    alias_submit(c, false);
}

void api_model_alias_delete(http_ctx *c)
{
    alias_submit(c, true);
}
