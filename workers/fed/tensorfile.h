/* tensorfile.h - the model files a federated site and its program exchange (docs/federated.md, "Your own
 * PyTorch model"): the safetensors layout, FP32 only.  Pure: bytes in memory to a parsed header and values,
 * and back; no I/O (workers/exec_fed_program.c reads and writes the files; python/gantry/federated.py is
 * the program's side).
 *
 *   8 bytes     N, the header's length (unsigned, little-endian)
 *   N bytes     a JSON object (UTF-8): {"NAME": {"dtype": "F32", "shape": [d0, ...], "data_offsets": [begin, end]},
 *               ..., "__metadata__": {"KEY": "string value", ...}}; trailing spaces allowed (alignment)
 *   the rest    the tensors' bytes, little-endian IEEE-754 binary32, at [begin, end) of this region
 *
 * Why this layout: the safetensors library (Python, Rust) and numpy read it as it is, it needs no pickle
 * (torch.load's), and a parser is a JSON header and bounds.  Rules checked by tensorfile_parse: the header
 * within the file and at most TENSORFILE_MAX_HEADER bytes, a JSON object without duplicate keys; each
 * tensor's dtype F32, at most TENSORFILE_MAX_DIMS dimensions, each >= 0, end - begin = 4 x its values;
 * the tensors tile the data region exactly (sorted by begin: from 0, each from the previous end, the last at
 * the file's end); names 1 to TENSORFILE_MAX_NAME bytes, at most TENSORFILE_MAX_TENSORS of them;
 * __metadata__, when present, an object of strings.  The model vector is the concatenation of the tensors
 * in the order of their bytes (data_offsets), which is the order of tensorfile_header.t. */
#ifndef GANTRY_FED_TENSORFILE_H
#define GANTRY_FED_TENSORFILE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define TENSORFILE_MAX_HEADER (100u << 20) /* bytes (the safetensors library's own limit) */
#define TENSORFILE_MAX_DIMS 8
#define TENSORFILE_MAX_NAME 1024
#define TENSORFILE_MAX_TENSORS 65536
#define TENSORFILE_META "__metadata__"

typedef struct {
    char *name;
    int ndim;
    int64_t shape[TENSORFILE_MAX_DIMS];
    size_t count;  /* values: the product of the shape */
    size_t offset; /* where its values start in the model vector */
} tensorfile_tensor;

typedef struct {
    tensorfile_tensor *t; /* in the order of their bytes */
    size_t n;
    size_t total; /* values in all */
    json_t *meta; /* __metadata__: an object of strings (empty when absent) */
} tensorfile_header;

/* Parses a whole file of len bytes; at most max_values values in all (0: no limit but the file's size).
 * 0 with *h filled and *data pointing at the data region inside buf; or -1 with err saying what is wrong
 * ("tensor 'fc.weight': dtype F16: only F32 is accepted"), *h left empty. */
int tensorfile_parse(const unsigned char *buf, size_t len, size_t max_values, tensorfile_header *h, const unsigned char **data,
                     char *err, size_t errlen);
void tensorfile_header_free(tensorfile_header *h);

/* the model vector: h->total values of data (little-endian FP32) as doubles */
void tensorfile_values(const tensorfile_header *h, const unsigned char *data, double *out);

/* 0 when b has a's tensors (names, shapes, order); else -1 with err naming the first difference, about b */
int tensorfile_same_layout(const tensorfile_header *a, const tensorfile_header *b, char *err, size_t errlen);

/* A file with layout's tensors holding values v (layout->total of them, rounded to FP32) and meta (an
 * object of strings, or NULL); malloc'd, its length in *len. */
unsigned char *tensorfile_write(const tensorfile_header *layout, const json_t *meta, const double *v, size_t *len);

/* n values of v as FP32 little-endian (rounded from double): 4 n bytes into out, the data region's encoding */
void tensorfile_f32_bytes(const double *v, size_t n, unsigned char *out);

/* the layout as compact JSON text, [["NAME", [d0, ...]], ...] in order (malloc'd): what two sites compare */
char *tensorfile_layout_text(const tensorfile_header *h);

/* the index of the first value of v that is not finite or whose magnitude is above max_abs; -1 when none */
long tensorfile_find_out_of_range(const double *v, size_t n, double max_abs);
/* the tensor holding value index i of the model vector */
const tensorfile_tensor *tensorfile_tensor_at(const tensorfile_header *h, size_t i);

#endif
