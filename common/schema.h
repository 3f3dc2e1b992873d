/* schema.h - declarative JSON shapes.  One static description of a document
 * both checks it (the first broken rule, with the field's path, e.g.
 * "spec.optimizer.lr": "must be a number in (0, 10]") and is written out as
 * JSON Schema 2020-12 for the OpenAPI document, so the API description and
 * the server's validation cannot drift apart.
 *
 * A shape says what one value may be: its JSON type, bounds (values of
 * numbers, lengths of strings, item counts of arrays), the allowed strings,
 * an object's members (required or not; unknown members are refused unless
 * the shape is open), or alternatives.  Rules that relate several fields
 * (exactly one of epochs and steps, a kernel no larger than its input) stay
 * in the module's code, after the shape check, and are named in the shape's
 * description.  Pure: no I/O. */
#ifndef GANTRY_SCHEMA_H
#define GANTRY_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

typedef enum {
    SCH_ANY,    /* any JSON value */
    SCH_BOOL,   /* true or false */
    SCH_INT,    /* a JSON integer (jansson's: no fraction, no exponent) */
    SCH_NUM,    /* any JSON number */
    SCH_STR,    /* a string: values (an enumeration) or a length in [lo, hi] */
    SCH_ARRAY,  /* items, count in [lo, hi] */
    SCH_OBJECT, /* base's members and members; other names refused unless SCH_OPEN (then checked by items
                   when given); lo/hi bound the number of members */
    SCH_ONEOF,  /* the first of alts whose JSON type fits (tag NULL), or the alt whose member tag has the value */
} sch_kind;

enum {
    SCH_LO = 1,       /* lo applies */
    SCH_HI = 2,       /* hi applies */
    SCH_LO_OPEN = 4,  /* lo excluded: (lo, ...) */
    SCH_HI_OPEN = 8,  /* hi excluded: (..., hi) */
    SCH_OPEN = 16,    /* objects: members not listed are allowed */
    SCH_NULLABLE = 32 /* null is taken as absent */
};

typedef struct sch sch;

typedef struct sch_member {
    const char *name;
    const sch *shape;
    int required;
} sch_member;

struct sch {
    sch_kind kind;
    unsigned flags;
    double lo, hi;
    const char *const *values; /* SCH_STR: allowed strings, NULL-ended */
    const sch_member *members; /* SCH_OBJECT: ended by a NULL name */
    const sch *base;           /* SCH_OBJECT: an object shape whose members this one has too (first) */
    const sch *items;          /* SCH_ARRAY: every item; SCH_OBJECT + SCH_OPEN: every unlisted member */
    const sch *const *alts;    /* SCH_ONEOF: NULL-ended */
    const char *tag;           /* SCH_ONEOF of objects: the member whose string value picks the alternative */
    const char *desc;          /* description in the document */
    const char *dflt;          /* the default when absent, as JSON text (the document's "default") */
    const char *msg;           /* the error for this value; NULL: written from the rule ("must be an integer in [1, 64]") */
};

/* the largest integer every JSON parser (and a double) holds exactly: 2^53 - 1; seeds stop there */
#define SCH_MAX_SAFE_INT 9007199254740991.0

/* Bounds, for designated initializers: {SCH_INT, SCH_IN(1, 64), .desc = "..."} */
#define SCH_IN(a, b) .flags = SCH_LO | SCH_HI, .lo = (a), .hi = (b)
#define SCH_IN_LO_OPEN(a, b) .flags = SCH_LO | SCH_LO_OPEN | SCH_HI, .lo = (a), .hi = (b) /* (a, b] */
#define SCH_IN_HI_OPEN(a, b) .flags = SCH_LO | SCH_HI | SCH_HI_OPEN, .lo = (a), .hi = (b) /* [a, b) */
#define SCH_MIN(a) .flags = SCH_LO, .lo = (a)
#define SCH_ABOVE(a) .flags = SCH_LO | SCH_LO_OPEN, .lo = (a)

/* 0 when v fits s; else -1 with the path of the first wrong value in field
 * (path names v itself, e.g. "spec") and the broken rule in msg.  A required
 * member that is absent is reported as "path.name". */
int sch_check(const sch *s, const json_t *v, const char *path, char *field, size_t fl, char *msg, size_t ml);

/* s as a JSON Schema 2020-12 object (new reference), or NULL out of memory */
json_t *sch_json(const sch *s);

/* the member named name of an object shape, or NULL */
const sch *sch_member_shape(const sch *s, const char *name);

/* member name of v as a number, or its shape's default (def when it has none):
 * the defaults the document shows are the ones the code applies */
double sch_number(const sch *s, const json_t *v, const char *name, double def);

/* One number through its shape, for a parser that reads a document as it goes (the placement
 * graph and strategy problem): v (NULL or JSON null: absent) checked against s (SCH_INT or
 * SCH_NUM; on failure its .msg or the rule, as sch_check) into *out.  Absent: *out = def, or -1
 * with "is required" when def is NaN.  path names v in field. */
int sch_read_number(const sch *s, const json_t *v, double def, const char *path, double *out, char *field, size_t fl, char *msg,
                    size_t ml);

#endif
