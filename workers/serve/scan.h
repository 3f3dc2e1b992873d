/* scan.h - the fast path for the bulk of an inference request: the numbers.
 *
 * A request body is mostly inputs[0].data, thousands of numbers; building a
 * jansson value per number costs more than the forward pass.  scan_data finds
 * that value's byte range with a small validating JSON skipper, so the caller
 * can parse the rest of the document (with the range replaced by []) with
 * jansson and read the numbers straight into the model's input buffer. */
#ifndef GANTRY_SERVE_SCAN_H
#define GANTRY_SERVE_SCAN_H

#include <stddef.h>

/* [*start, *end) of the value of inputs[0].data in the JSON text s; 0, or -1
 * when the text up to that value is not well-formed JSON or has no such value
 * (the caller then falls back to the general parser, which explains what is
 * wrong).  The text after the value is not checked here: the caller parses it. */
int scan_data(const char *s, size_t n, size_t *start, size_t *end);

/* Reads the finite numbers of a (possibly nested) JSON array of numbers into
 * out (at most cap); 0 with *count, or -1 on anything else in it or overflow. */
int scan_numbers(const char *s, size_t n, float *out, size_t cap, size_t *count);

#endif
