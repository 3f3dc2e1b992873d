/* tscode.c - tscode.h: a byte-at-a-time scanner of TorchScript source for the three refusals. */
#include "workers/serve/tscode.h"

#include <stdio.h>
#include <string.h>

enum { CODE, OPENING, STRING, COMMENT };

void tscode_init(tscode_scan *s)
{
    memset(s, 0, sizeof(*s));
    s->mode = CODE;
    s->line_start = 1;
    s->line = 1;
}

static int refuse(tscode_scan *s, const char *why)
{
    s->why = why;
    return -1;
}

/* the identifier just read ends */
static int end_ident(tscode_scan *s)
{
    if (!s->idlen) return 0;
    int is_def = s->idlen == 3 && !memcmp(s->id, "def", 3);
    int is_setstate = s->idlen == 12 && !memcmp(s->id, "__setstate__", 12);
    s->idlen = 0;
    if (s->after_def && is_setstate) return refuse(s, "defines __setstate__, which torch::jit::load runs");
    s->after_def = is_def;
    return 0;
}

/* a line's first token starts at column s->col: open or close indentation levels */
static int indent(tscode_scan *s)
{
    while (s->nind > 0 && s->ind[s->nind - 1] > s->col)
        s->nind--;
    if (s->col > (s->nind ? s->ind[s->nind - 1] : 0)) {
        if (s->nind == TSCODE_MAX_DEPTH) return refuse(s, "indentation nests more than 200 blocks deep");
        s->ind[s->nind++] = s->col;
    }
    return 0;
}

static int code_byte(tscode_scan *s, int c)
{
    int bs = s->backslash;
    s->backslash = 0;
    if (c == '\n') {
        if (end_ident(s)) return -1;
        s->line++;
        if (bs) return 0; /* a continued line: neither a new line's indentation nor the end of `def` */
        s->after_def = 0;
        if (s->depth == 0) s->line_start = 1, s->col = 0;
        return 0;
    }
    if (s->line_start) {
        if (c == ' ') return s->col++, 0;
        if (c == '\t') return s->col = (s->col / 8 + 1) * 8, 0;
        if (c == '\r' || c == '\f') return 0;
        s->line_start = 0;
        if (c != '#' && indent(s)) return -1; /* a comment-only line opens nothing */
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80) {
        if (s->idlen < (int)sizeof(s->id)) s->id[s->idlen] = (char)c;
        s->idlen++;
        return 0;
    }
    if (end_ident(s)) return -1;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f') return 0;
    if (c == '\\') {
        s->backslash = 1;
        return 0;
    }
    s->after_def = 0;
    switch (c) {
    case '(':
    case '[':
    case '{':
        if (s->depth == TSCODE_MAX_DEPTH) return refuse(s, "brackets nest more than 200 deep");
        s->depth++;
        break;
    case ')':
    case ']':
    case '}':
        if (s->depth > 0) s->depth--;
        break;
    case '#':
        s->mode = COMMENT;
        break;
    case '\'':
    case '"':
        s->mode = OPENING, s->quote = c, s->nquote = 1;
        break;
    default:
        break;
    }
    return 0;
}

static int byte(tscode_scan *s, int c)
{
    switch (s->mode) {
    case OPENING:
        if (c == s->quote) {
            if (++s->nquote == 3) s->mode = STRING, s->triple = 1, s->nquote = 0;
            return 0;
        }
        if (s->nquote == 2) { /* "" : an empty string, then code */
            s->mode = CODE;
            return code_byte(s, c);
        }
        s->mode = STRING, s->triple = 0, s->nquote = 0, s->escape = 0;
        __attribute__((fallthrough)); /* c is the string's first byte */
    case STRING:
        if (c == '\n') s->line++;
        if (s->escape) {
            s->escape = 0;
            return 0;
        }
        if (c == '\\') {
            s->escape = 1, s->nquote = 0;
            return 0;
        }
        if (c == s->quote) {
            if (!s->triple || ++s->nquote == 3) s->mode = CODE;
            return 0;
        }
        s->nquote = 0;
        if (c == '\n' && !s->triple) { /* unterminated: the lexer refuses it; go on as code */
            s->line--;
            s->mode = CODE;
            return code_byte(s, c);
        }
        return 0;
    case COMMENT:
        if (c != '\n') return 0;
        s->mode = CODE;
        return code_byte(s, c);
    default:
        return code_byte(s, c);
    }
}

int tscode_feed(tscode_scan *s, const unsigned char *p, size_t n)
{
    if (s->why) return -1;
    for (size_t i = 0; i < n; i++)
        if (byte(s, p[i])) return -1;
    return 0;
}

void tscode_describe(const tscode_scan *s, char *msg, size_t msg_len)
{
    if (msg && msg_len) snprintf(msg, msg_len, "%s (line %ld)", s->why ? s->why : "fine", s->line);
}

int tscode_check(const unsigned char *p, size_t n, char *msg, size_t msg_len)
{
    tscode_scan s;
    tscode_init(&s);
    if (tscode_feed(&s, p, n) == 0) {
        tscode_scan end = s; /* a trailing identifier ends with the file */
        if (end_ident(&end) == 0) return 0;
        s = end;
    }
    tscode_describe(&s, msg, msg_len);
    return -1;
}
