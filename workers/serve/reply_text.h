/* reply_text.h - the text of an Open Inference Protocol reply, built in a growing buffer: the
 * head every reply starts with (model_name, model_version, the request's id) and printf-style
 * appends.  Both replicas write their replies with it: the built-in model's (serve.c) and a
 * TorchScript model's (ts_request.c). */
#ifndef GANTRY_SERVE_REPLY_TEXT_H
#define GANTRY_SERVE_REPLY_TEXT_H

#include <jansson.h>
#include <stddef.h>

typedef struct {
    char *b; /* malloc'd, NUL-terminated after each append */
    size_t len, cap;
} reply_text;

/* a new buffer holding {"model_name":<name>,"model_version":"<version>"[,"id":<doc's id, when a string>]
 * (name and id escaped as JSON strings); the caller appends ,"outputs":[...]} and takes .b */
reply_text reply_text_start(const char *name, int version, const json_t *doc);
/* room for more bytes (and the NUL) after len */
void reply_text_reserve(reply_text *o, size_t more);
void reply_text_put(reply_text *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
