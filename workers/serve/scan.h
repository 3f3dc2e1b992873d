/* scan.h - the fast path for the bulk of an inference request: the numbers.
 *
 * A request body is mostly inputs[0].data, thousands of numbers; building a
 * jansson value per number costs more than the forward pass.  scan_data finds
 * that value's byte range with a small validating JSON skipper, so the caller
 * can parse the rest of the document (with the range replaced by []) with
 * jansson and read the numbers straight into the model's input buffer.
 * scan_inputs_data does the same for every input of a request (a TorchScript
 * model may take several), scan_values reads them as the input's datatype. */
#ifndef GANTRY_SERVE_SCAN_H
#define GANTRY_SERVE_SCAN_H

#include <stddef.h>

#include "spec/serve_signature.h"

/* a value's byte range [start, end) in a request body */
typedef struct {
    size_t start, end;
} scan_range;

/* [*start, *end) of the value of inputs[0].data in the JSON text s; 0, or -1
 * when the text up to that value is not well-formed JSON or has no such value
 * (the caller then falls back to the general parser, which explains what is
 * wrong).  The text after the value is not checked here: the caller parses it;
 * nor is an array of numbers' grammar inside the value: scan_values reads it. */
int scan_data(const char *s, size_t n, size_t *start, size_t *end);

/* The byte ranges of inputs[i].data for each element of the inputs array (at most cap elements);
 * 0 with *count (the array's length, maybe 0), or -1 when the text up to the end of that array is
 * not well-formed JSON, inputs is not an array, has more than cap elements, or an element is not an
 * object with exactly one "data" member (the caller then falls back to the general parser, which
 * explains what is wrong).  The text after the array is not checked here: the caller parses it; nor
 * is the grammar inside a data value that is an array of numbers: scan_values checks it. */
int scan_inputs_data(const char *s, size_t n, scan_range *r, int cap, int *count);

/* Reads the numbers of a (possibly nested) JSON array into out as values of type t, at most cap:
 * 0 with *count; -1 with *count the index of the first value that is not a number of that type
 * (FP32, FP64: finite after rounding to the type; INT32, INT64: an integer literal, no fraction or
 * exponent, read exactly and in the type's range; any number: at most 63 characters); -2 when
 * there are more than cap values (*count == cap); -3 when the text is not one JSON number or array
 * of them ("[1 2]", "[1,]", unbalanced; *count: the values before the fault).  The grammar is
 * checked here, not by scan_data / scan_inputs_data, which only find where such an array ends.  Floats read exactly as strtof/strtod would,
 * most without them: up to 15 significant digits and 10^+-22 take Clinger's fast path (a
 * ResNet input of 150,528 "%.9g" values: about 3.5 ms instead of 11). */
int scan_values(const char *s, size_t n, sig_dtype t, void *out, size_t cap, size_t *count);

/* Reads the finite numbers of a (possibly nested) JSON array of numbers into
 * out (at most cap); 0 with *count, or -1 on anything else in it, malformed JSON or overflow. */
int scan_numbers(const char *s, size_t n, float *out, size_t cap, size_t *count);

#endif
