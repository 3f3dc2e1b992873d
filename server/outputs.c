/* outputs.c - GET /v1/jobs/{id}/outputs and GET /v1/jobs/{id}/outputs/{path} (outputs.h).
 * A download is streamed OUTPUTS_CHUNK bytes at a time (an h2o generator: the next read when h2o
 * has sent the previous one), never read whole into memory. */
#include "server/outputs.h"
#include "common/clock.h"
#include "server/api.h"
#include "server/httpstats.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUTPUTS_CHUNK (256u << 10)

/* ---- opening ---- */

static int refuse(int *err, int kind, char *msg, size_t mlen, const char *fmt, const char *what, int fd)
{
    if (fd >= 0) close(fd);
    *err = kind;
    snprintf(msg, mlen, fmt, what);
    return -1;
}

int outputs_open(const char *dir, const char *rel, int64_t bytes, int *err, char *msg, size_t mlen)
{
    char path[4096];
    if (!dir || dir[0] != '/' || !rel || rel[0] == '/' || snprintf(path, sizeof(path), "%s", rel) >= (int)sizeof(path))
        return refuse(err, OUTPUTS_CHANGED, msg, mlen, "%s is not a path below the output directory", rel ? rel : "", -1);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return refuse(err, errno == ENOENT ? OUTPUTS_GONE : OUTPUTS_CHANGED, msg, mlen, "the job's output directory %s",
                      errno == ENOENT ? "no longer exists" : "cannot be opened", -1);
    char *save = NULL;
    for (char *comp = strtok_r(path, "/", &save); comp;) {
        char *next = strtok_r(NULL, "/", &save);
        if (!strcmp(comp, ".") || !strcmp(comp, ".."))
            return refuse(err, OUTPUTS_CHANGED, msg, mlen, "%s is not a path below the output directory", rel, fd);
        int sub = openat(fd, comp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | (next ? O_DIRECTORY : O_NONBLOCK));
        int e = errno;
        close(fd);
        fd = sub;
        if (fd < 0) {
            if (e == ENOENT) return refuse(err, OUTPUTS_GONE, msg, mlen, "%s no longer exists", rel, -1);
            /* ELOOP: a symbolic link; ENOTDIR: a link or a file where a directory was */
            return refuse(err, OUTPUTS_CHANGED, msg, mlen,
                          "%s is no longer a regular file inside the output directory (a symbolic link is never followed)", rel,
                          -1);
        }
        comp = next;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return refuse(err, OUTPUTS_CHANGED, msg, mlen, "%s is not a regular file", rel, fd);
    if ((int64_t)st.st_size != bytes)
        return refuse(err, OUTPUTS_CHANGED, msg, mlen, "%s changed since it was listed (its size differs)", rel, fd);
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

/* ---- the routes ---- */

/* result.outputs of a job the caller may see, or NULL with the 404 sent; *job to release */
static const json_t *outputs_of(http_ctx *c, json_t **job)
{
    *job = api_job_visible(c, true);
    if (!*job) return NULL;
    const json_t *o = json_object_get(json_object_get(*job, "result"), "outputs");
    if (!json_is_object(o) || !json_is_array(json_object_get(o, "files"))) {
        http_error(c, GERR_NOT_FOUND, "id", "job %s has no outputs: a program job lists the files it wrote when it ends",
                   http_param(c, 0));
        return NULL;
    }
    return o;
}

void api_job_outputs(http_ctx *c)
{
    json_t *job;
    const json_t *o = outputs_of(c, &job);
    if (o) {
        json_t *files = json_array(), *f;
        size_t i;
        json_array_foreach(json_object_get(o, "files"), i, f) /* what a file is, nothing else the worker may add */
            json_array_append_new(files, json_pack("{s:O?, s:O?, s:O?}", "path", json_object_get(f, "path"), "bytes",
                                                   json_object_get(f, "bytes"), "sha256", json_object_get(f, "sha256")));
        http_reply_json(c, 200, json_pack("{s:O, s:o}", "job_id", json_object_get(job, "id"), "files", files));
    }
    json_decref(job);
}

typedef struct {
    h2o_generator_t gen; /* first: h2o hands it back */
    int fd;
    int64_t left;
    char *buf;
} download;

static void download_proceed(h2o_generator_t *g, h2o_req_t *req)
{
    download *d = (download *)g;
    size_t want = d->left < (int64_t)OUTPUTS_CHUNK ? (size_t)d->left : OUTPUTS_CHUNK;
    ssize_t n;
    do
        n = read(d->fd, d->buf, want);
    while (n < 0 && errno == EINTR);
    if (n <= 0) { /* shorter than listed: the client sees a response cut before its Content-Length */
        h2o_send(req, NULL, 0, H2O_SEND_STATE_ERROR);
        return;
    }
    d->left -= n;
    h2o_iovec_t buf = h2o_iovec_init(d->buf, (size_t)n);
    h2o_send(req, &buf, 1, d->left > 0 ? H2O_SEND_STATE_IN_PROGRESS : H2O_SEND_STATE_FINAL);
}

static void download_stop(h2o_generator_t *g, h2o_req_t *req)
{
    (void)g;
    (void)req; /* the descriptor is closed with the request's pool (download_dispose) */
}

static void download_dispose(void *p)
{
    download *d = p;
    if (d->fd >= 0) close(d->fd);
}

/* a byte a file name keeps as it is in Content-Disposition */
static bool plain(unsigned char ch)
{
    return (ch >= '0' && ch <= '9') || ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z') || ch == '.' || ch == '_' || ch == '-';
}

/* Content-Disposition for a file name: an ASCII fallback and the exact name (RFC 6266, RFC 8187) */
static const char *disposition(h2o_mem_pool_t *pool, const char *path)
{
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    size_t n = strlen(name);
    char *out = h2o_mem_alloc_pool(pool, 64 + 4 * n);
    char *p = out + sprintf(out, "attachment; filename=\"");
    for (const unsigned char *s = (const unsigned char *)name; *s; s++)
        *p++ = plain(*s) ? (char)*s : '_';
    p += sprintf(p, "\"; filename*=UTF-8''");
    for (const unsigned char *s = (const unsigned char *)name; *s; s++)
        p += plain(*s) ? sprintf(p, "%c", *s) : sprintf(p, "%%%02X", *s);
    return out;
}

void api_job_output_get(http_ctx *c)
{
    json_t *job;
    const json_t *o = outputs_of(c, &job);
    if (!o) {
        json_decref(job);
        return;
    }
    const char *want = http_param(c, 1);
    const json_t *listed = NULL, *f;
    size_t i;
    json_array_foreach(json_object_get(o, "files"), i, f)
    {
        const char *p = json_string_value(json_object_get(f, "path"));
        if (p && !strcmp(p, want)) listed = f;
    }
    const json_t *bytes = json_object_get(listed, "bytes");
    if (!listed || !json_is_integer(bytes)) {
        json_decref(job);
        http_error(c, GERR_NOT_FOUND, "path", "no output file %s in this job (GET /v1/jobs/%s/outputs lists them)", want,
                   http_param(c, 0));
        return;
    }
    int err = 0;
    char msg[512];
    int64_t size = json_integer_value(bytes);
    int fd = outputs_open(json_string_value(json_object_get(o, "dir")), want, size, &err, msg, sizeof(msg));
    json_decref(job);
    if (fd < 0) {
        http_error(c, err == OUTPUTS_GONE ? GERR_NOT_FOUND : GERR_CONFLICT, "path", "%s", msg);
        return;
    }
    h2o_req_t *req = c->req;
    download *d = h2o_mem_alloc_shared(&req->pool, sizeof(*d), download_dispose);
    memset(d, 0, sizeof(*d));
    d->gen.proceed = download_proceed;
    d->gen.stop = download_stop;
    d->fd = fd;
    d->left = size;
    d->buf = h2o_mem_alloc_pool(&req->pool, OUTPUTS_CHUNK);
    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = (size_t)d->left;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/octet-stream"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-store"));
    http_add_header(c, "content-disposition", disposition(&req->pool, want));
    httpstats_record(c->srv->httpstats, c->route_index, 200, (double)(clock_mono_us() - c->start_us) / 1e6);
    h2o_start_response(req, &d->gen);
    if (d->left == 0 || h2o_memis(req->method.base, req->method.len, H2O_STRLIT("HEAD")))
        h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
    else
        download_proceed(&d->gen, req);
}
