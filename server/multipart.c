/* multipart.c - multipart/form-data bodies (multipart.h).
 *
 * One pass over the body: find the first delimiter, then for each part read its header lines up to
 * the blank line and search the next "CRLF--boundary" with memmem.  A candidate delimiter followed
 * by anything but transport padding and CRLF, or "--", is data (a part may hold the boundary text
 * without the leading CRLF--, or a longer boundary that starts with ours).  Every read is bounded by
 * len; nothing is copied but the short header values into the part. */
#include "server/multipart.h"

#include "common/fielderr.h"
#include "common/utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MP_BOUNDARY_MAX 70

static int is_ws(char c)
{
    return c == ' ' || c == '\t';
}

/* ---- header values: "type; name=value; name=\"quoted\"" ---- */

typedef struct {
    const char *name; /* the parameter wanted, compared without case */
    char *out;        /* its value, NUL-terminated when it fits */
    size_t cap;
    size_t len; /* the value's length (also when it did not fit) */
    int found;
} mp_param;

/* Splits s[0..n) into its type (what comes before the first ';', spaces trimmed, into type, at
 * most type_cap - 1 bytes kept) and its parameters, filling those listed in want.  -1 with a
 * description in err on a syntax error or a wanted parameter given twice. */
static int parse_value(const char *s, size_t n, char *type, size_t type_cap, mp_param *want, int nwant, char *err, size_t err_len)
{
    const char *p = s, *end = s + n;
    while (p < end && is_ws(*p))
        p++;
    const char *t = p;
    while (p < end && *p != ';' && !is_ws(*p))
        p++;
    size_t tl = (size_t)(p - t) < type_cap - 1 ? (size_t)(p - t) : type_cap - 1;
    memcpy(type, t, tl);
    type[tl] = '\0';
    while (p < end && is_ws(*p))
        p++;
    while (p < end) {
        if (*p != ';') return msg_fail(err, err_len, "expected ';' between parameters");
        p++;
        while (p < end && is_ws(*p))
            p++;
        if (p == end) break; /* a trailing ';' */
        const char *k = p;
        while (p < end && *p != '=' && *p != ';' && !is_ws(*p))
            p++;
        size_t kl = (size_t)(p - k);
        while (p < end && is_ws(*p))
            p++;
        if (kl == 0 || p == end || *p != '=') return msg_fail(err, err_len, "a parameter without '=value'");
        p++;
        while (p < end && is_ws(*p))
            p++;
        mp_param *w = NULL;
        for (int i = 0; i < nwant; i++)
            if (strlen(want[i].name) == kl && strncasecmp(want[i].name, k, kl) == 0) w = &want[i];
        if (w && w->found) return msg_fail(err, err_len, "the %s parameter appears twice", w->name);
        size_t vl = 0;
        if (p < end && *p == '"') {
            p++;
            while (p < end && *p != '"') {
                if (*p == '\\' && p + 1 < end) p++; /* a backslash escapes the next character */
                if (w && vl + 1 < w->cap) w->out[vl] = *p;
                vl++, p++;
            }
            if (p == end) return msg_fail(err, err_len, "a quoted value without its closing '\"'");
            p++;
        } else {
            while (p < end && *p != ';' && !is_ws(*p) && *p != '"') {
                if (w && vl + 1 < w->cap) w->out[vl] = *p;
                vl++, p++;
            }
            if (vl == 0) return msg_fail(err, err_len, "a parameter with an empty value");
        }
        if (w) {
            w->found = 1;
            w->len = vl;
            w->out[vl < w->cap ? vl : w->cap - 1] = '\0';
        }
        while (p < end && is_ws(*p))
            p++;
    }
    return 0;
}

/* 1 when RFC 2046 allows c in a boundary */
static int bchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("'()+_,-./:=? ", c) != NULL;
}

/* the boundary from the request's Content-Type */
static int parse_content_type(const char *ct, char *boundary, char *msg, size_t msg_len)
{
    const char *want = "Content-Type: expected multipart/form-data with a boundary parameter";
    if (!ct) return msg_fail(msg, msg_len, "%s (the request has none)", want);
    char type[64], err[96];
    mp_param b = {.name = "boundary", .out = boundary, .cap = MP_BOUNDARY_MAX + 1};
    if (parse_value(ct, strlen(ct), type, sizeof(type), &b, 1, err, sizeof(err)) != 0)
        return msg_fail(msg, msg_len, "Content-Type: %s", err);
    if (strcasecmp(type, "multipart/form-data") != 0) {
        for (char *c = type; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
        return msg_fail(msg, msg_len, "%s, not '%s'", want, type);
    }
    if (!b.found) return msg_fail(msg, msg_len, "%s (multipart/form-data without one)", want);
    int ok = b.len >= 1 && b.len <= MP_BOUNDARY_MAX && boundary[b.len - 1] != ' ';
    for (size_t i = 0; ok && i < b.len; i++)
        ok = bchar(boundary[i]);
    if (!ok)
        return msg_fail(
            msg, msg_len,
            "Content-Type: the boundary must be 1 to 70 characters: letters, digits and '()+_,-./:=? or space (not last)");
    return 0;
}

/* ---- the body ---- */

enum { DELIM_PART, DELIM_CLOSE, DELIM_LF, DELIM_END, DELIM_NONE };

/* What follows "--boundary" at body[q]: a part (its headers start at *next), the close, an LF-only
 * line, the end of the body, or something else (then it was no delimiter). */
static int after_delimiter(const char *body, size_t len, size_t q, size_t *next)
{
    if (q + 2 <= len && body[q] == '-' && body[q + 1] == '-') return DELIM_CLOSE;
    while (q < len && is_ws(body[q]))
        q++;
    if (q == len) return DELIM_END;
    if (body[q] == '\n') return DELIM_LF;
    if (body[q] != '\r') return DELIM_NONE;
    if (q + 1 == len) return DELIM_END;
    if (body[q + 1] != '\n') return DELIM_NONE;
    *next = q + 2;
    return DELIM_PART;
}

/* "part 2" or "part 2 ('file')" */
static const char *label(char *buf, size_t cap, int i, const char *name)
{
    if (name && *name)
        snprintf(buf, cap, "part %d ('%s')", i + 1, name);
    else
        snprintf(buf, cap, "part %d", i + 1);
    return buf;
}

static const char *lf_only = "line endings must be CRLF (\\r\\n), as RFC 2046 requires; this body has LF-only lines";

/* a name or filename: UTF-8 without control characters */
static int text_ok(const char *s, size_t len)
{
    if (strlen(s) != len || utf8_has_control(s)) return 0;
    char copy[MP_FILENAME_MAX + 1];
    memcpy(copy, s, len + 1);
    return strcmp(utf8_scrub(copy), s) == 0;
}

/* The header lines of part i, from body[*pos] through the blank line; *pos then points at its data. */
static int parse_headers(const char *body, size_t len, size_t *pos, int i, mp_part *part, char *msg, size_t msg_len)
{
    char lb[96], err[96];
    size_t start = *pos, ls = start;
    int disposition = 0;
    mp_param want[2] = {{.name = "name", .out = part->name, .cap = sizeof(part->name)},
                        {.name = "filename", .out = part->filename, .cap = sizeof(part->filename)}};
    for (;;) {
        const char *nl = memchr(body + ls, '\n', len - ls);
        size_t e = nl ? (size_t)(nl - body) : len; /* the line and its CR: body[ls..e) */
        int blank = nl && e == ls + 1 && body[ls] == '\r';
        if (!blank && (nl ? e + 1 : len) - start > MP_MAX_HEADER_BYTES)
            return msg_fail(msg, msg_len, "%s: header lines longer than %d bytes", label(lb, sizeof(lb), i, NULL),
                            MP_MAX_HEADER_BYTES);
        if (!nl)
            return msg_fail(msg, msg_len, "the body ends inside the headers of %s (a blank line must end them)",
                            label(lb, sizeof(lb), i, NULL));
        if (e == ls || body[e - 1] != '\r') return msg_fail(msg, msg_len, "%s", lf_only);
        const char *line = body + ls;
        size_t n = e - 1 - ls;
        ls = e + 1;
        if (n == 0) break; /* the blank line */
        if (is_ws(line[0]))
            return msg_fail(msg, msg_len, "%s: folded header lines (starting with a space or tab) are not supported",
                            label(lb, sizeof(lb), i, NULL));
        const char *colon = memchr(line, ':', n);
        if (!colon) return msg_fail(msg, msg_len, "%s: a header line without ':'", label(lb, sizeof(lb), i, NULL));
        size_t kl = (size_t)(colon - line);
        while (kl && is_ws(line[kl - 1]))
            kl--;
        const char *v = colon + 1, *ve = line + n;
        while (v < ve && is_ws(*v))
            v++;
        while (ve > v && is_ws(ve[-1]))
            ve--;
        if (kl == 19 && strncasecmp(line, "Content-Disposition", kl) == 0) {
            if (disposition++)
                return msg_fail(msg, msg_len, "%s: Content-Disposition appears twice", label(lb, sizeof(lb), i, NULL));
            char type[16];
            if (parse_value(v, (size_t)(ve - v), type, sizeof(type), want, 2, err, sizeof(err)) != 0) {
                part->name[0] = '\0';
                return msg_fail(msg, msg_len, "%s: Content-Disposition: %s", label(lb, sizeof(lb), i, NULL), err);
            }
            if (strcasecmp(type, "form-data") != 0) {
                part->name[0] = '\0';
                return msg_fail(msg, msg_len, "%s: Content-Disposition must be form-data", label(lb, sizeof(lb), i, NULL));
            }
        } else if (kl == 12 && strncasecmp(line, "Content-Type", kl) == 0) {
            size_t cl = (size_t)(ve - v);
            if (cl > MP_CONTENT_TYPE_MAX)
                return msg_fail(msg, msg_len, "%s: Content-Type longer than %d bytes", label(lb, sizeof(lb), i, NULL),
                                MP_CONTENT_TYPE_MAX);
            for (size_t k = 0; k < cl; k++)
                if ((unsigned char)v[k] < 0x20 || (unsigned char)v[k] >= 0x7f)
                    return msg_fail(msg, msg_len, "%s: Content-Type must be printable ASCII", label(lb, sizeof(lb), i, NULL));
            memcpy(part->content_type, v, cl);
            part->content_type[cl] = '\0';
        }
    }
    *pos = ls;
    /* the name and filename as sent, checked before a message quotes them */
    if (!disposition || !want[0].found) {
        part->name[0] = '\0';
        return msg_fail(msg, msg_len, "%s: no Content-Disposition: form-data; name=\"...\"", label(lb, sizeof(lb), i, NULL));
    }
    if (want[0].len == 0 || want[0].len > MP_NAME_MAX || !text_ok(part->name, want[0].len)) {
        part->name[0] = '\0';
        return msg_fail(msg, msg_len, "%s: the name must be 1 to %d bytes of UTF-8 without control characters",
                        label(lb, sizeof(lb), i, NULL), MP_NAME_MAX);
    }
    if (want[1].found && (want[1].len > MP_FILENAME_MAX || !text_ok(part->filename, want[1].len)))
        return msg_fail(msg, msg_len, "%s: the filename must be at most %d bytes of UTF-8 without control characters",
                        label(lb, sizeof(lb), i, part->name), MP_FILENAME_MAX);
    part->has_filename = want[1].found;
    return 0;
}

int multipart_parse(const char *content_type, const char *body, size_t len, mp_part *parts, int max_parts, int *nparts, char *msg,
                    size_t msg_len)
{
    char boundary[MP_BOUNDARY_MAX + 1], lb[96];
    *nparts = 0;
    if (parse_content_type(content_type, boundary, msg, msg_len) != 0) return -1;
    if (!body) body = "", len = 0;
    /* the delimiter with the line break before it: "\r\n--boundary" */
    char delim[4 + MP_BOUNDARY_MAX + 1];
    int dl = snprintf(delim, sizeof(delim), "\r\n--%s", boundary);

    /* the first delimiter: at the start of the body, or of a line of the preamble */
    size_t next = 0, q = 0;
    int kind = DELIM_NONE;
    if (len >= (size_t)dl - 2 && memcmp(body, delim + 2, (size_t)dl - 2) == 0)
        kind = after_delimiter(body, len, (size_t)dl - 2, &next);
    while (kind == DELIM_NONE) {
        const char *d = len > q ? memmem(body + q, len - q, delim, (size_t)dl) : NULL;
        if (!d) break;
        q = (size_t)(d - body) + 1;
        kind = after_delimiter(body, len, (size_t)(d - body) + (size_t)dl, &next);
    }
    if (kind == DELIM_LF) return msg_fail(msg, msg_len, "%s", lf_only);
    if (kind == DELIM_NONE) {
        if (len && memmem(body, len, delim + 1, (size_t)dl - 1)) return msg_fail(msg, msg_len, "%s", lf_only);
        return msg_fail(msg, msg_len, "the body has no --%s line (the boundary from Content-Type)", boundary);
    }
    if (kind == DELIM_END) return msg_fail(msg, msg_len, "the body ends before the closing boundary --%s--", boundary);

    int n = 0;
    size_t pos = next;
    while (kind == DELIM_PART) {
        if (n == max_parts) return msg_fail(msg, msg_len, "more than %d parts", max_parts);
        mp_part *part = &parts[n];
        memset(part, 0, sizeof(*part));
        if (parse_headers(body, len, &pos, n, part, msg, msg_len) != 0) return -1;
        for (int j = 0; j < n; j++)
            if (strcmp(parts[j].name, part->name) == 0) return msg_fail(msg, msg_len, "part '%s' appears twice", part->name);
        /* the data runs to the next delimiter */
        kind = DELIM_NONE;
        for (q = pos; kind == DELIM_NONE;) {
            const char *d = len > q ? memmem(body + q, len - q, delim, (size_t)dl) : NULL;
            if (!d)
                return msg_fail(msg, msg_len, "the body ends before the closing boundary --%s-- (in %s)", boundary,
                                label(lb, sizeof(lb), n, part->name));
            q = (size_t)(d - body) + 1;
            kind = after_delimiter(body, len, (size_t)(d - body) + (size_t)dl, &next);
            if (kind != DELIM_NONE) {
                part->data = body + pos;
                part->len = (size_t)(d - body) - pos;
            }
        }
        if (kind == DELIM_LF) return msg_fail(msg, msg_len, "%s", lf_only);
        if (kind == DELIM_END)
            return msg_fail(msg, msg_len, "the body ends before the closing boundary --%s-- (after %s)", boundary,
                            label(lb, sizeof(lb), n, part->name));
        n++;
        pos = next;
    }
    *nparts = n;
    return 0;
}

const mp_part *multipart_find(const mp_part *parts, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(parts[i].name, name) == 0) return &parts[i];
    return NULL;
}
