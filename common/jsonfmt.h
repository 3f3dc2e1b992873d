/* jsonfmt.h - numbers people read in the JSON the server sends.
 * jansson prints reals with "%.17g", so 0.8854 goes out as 0.88539999999999996.  jsonfmt_shorten rewrites
 * every real of a JSON text to the fewest significant digits ("%.1g" .. "%.17g") that strtod reads back as
 * the same double, in the notation the text had (plain stays plain, an exponent stays an exponent), and a
 * real stays a real ("1.0" stays "1.0", "-0.0" stays "-0.0").  Integers and text inside strings are left
 * as they are.  Pure: no I/O, no allocation. */
#ifndef GANTRY_JSONFMT_H
#define GANTRY_JSONFMT_H

#include <jansson.h>
#include <stddef.h>

/* rewrites the reals of the JSON text s (NUL-terminated) in place, never making a number longer;
 * returns the new length of s */
size_t jsonfmt_shorten(char *s);

/* the shortest form of one double, as jsonfmt_shorten writes it in plain notation when exp is 0 and
 * in exponent notation when exp is 1 (a form without '.' or exponent gets ".0"); returns its length,
 * 0 when out (len bytes) is too small or d is not finite */
size_t jsonfmt_double(double d, int exp, char *out, size_t len);

/* json_dumps, then jsonfmt_shorten: what every JSON body and event sent to a client goes through */
char *jsonfmt_dumps(const json_t *j, size_t flags);

#endif
