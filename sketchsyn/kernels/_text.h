/* Plain numeric CSV lines parsed in one pass (included by _text.pyx, which checks every
 * argument first).
 *
 * A block is "clean" when it ends in a newline, every line has the header's number of fields, every wanted field is
 * a plain decimal number (-?digits(.digits)?([eE][+-]?digits)?, no leading zero before another
 * digit, at most 19 significant digits) whose value m * 10^e has m <= 2^53 and |e| <= 22, and
 * no line holds a quote, a carriage return other than before its newline, or a byte past
 * ASCII. Such a number is one correctly rounded multiplication or division of two exact
 * doubles (Clinger's fast path), so it is the double every correctly rounding parser gives
 * (pyarrow's among them). Anything else makes the block not clean: the caller parses it the
 * general way. */
#ifndef SKETCHSYN_TEXT_H
#define SKETCHSYN_TEXT_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>

static const double ss_pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                    1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                    1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static inline int ss_digit(unsigned char c) { return (unsigned)(c - '0') < 10u; }

/* The run of digits at *pp added to *m (m = m * 10**k + their value), *pp moved past them;
 * returns k. Byte by byte (eight at a time with SWAR loads measured slower on the short
 * numbers of real files); the block's final newline stops the run. */
static inline ptrdiff_t ss_digits(const unsigned char **pp, uint64_t *m) {
    const unsigned char *p = *pp;
    uint64_t acc = *m;
    while (ss_digit(*p)) acc = acc * 10u + (uint64_t)(*p++ - '0');
    ptrdiff_t k = p - *pp;
    *pp = p;
    *m = acc;
    return k;
}

/* The plain number at p: 1 with *out and *q (the byte after it), else 0. The block ends in a
 * newline (the caller checks), which stops every loop before the end of the buffer. */
static inline int ss_number(const unsigned char *p, const unsigned char **q, double *out) {
    int neg = *p == '-';
    p += neg;
    uint64_t m = 0;
    if (p[0] == '0' && ss_digit(p[1])) return 0; /* a leading zero: the general parser */
    ptrdiff_t n = ss_digits(&p, &m);
    if (!n) return 0;
    int e = 0;
    if (*p == '.') {
        p++;
        ptrdiff_t f = ss_digits(&p, &m);
        if (!f || n + f > 19) return 0;
        e = (int)-f;
        n += f;
    }
    /* At most 19 digits (m < 10**19 < 2**64, leading zeros included: more goes general). */
    if (n > 19) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        int eneg = 0, x = 0;
        if (*p == '+' || *p == '-') eneg = *p++ == '-';
        const unsigned char *g = p;
        while (ss_digit(*p)) {
            if (x < 100000) x = x * 10 + (*p - '0');
            p++;
        }
        if (p == g) return 0;
        e += eneg ? -x : x;
    }
    if (m > ((uint64_t)1 << 53)) return 0;
    double v = (double)m;
    if (m) {
        if (e < -22 || e > 22) return 0;
        v = e < 0 ? v / ss_pow10[-e] : v * ss_pow10[e];
    }
    *out = neg ? -v : v;
    *q = p;
    return 1;
}

/* The lines of buf[0:len] (a last one without its newline counted too). */
static ptrdiff_t ss_count_lines(const unsigned char *buf, ptrdiff_t len) {
    ptrdiff_t n = 0;
    const unsigned char *p = buf, *end = buf + len;
    while (p < end) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(end - p));
        n++;
        if (!nl) break;
        p = nl + 1;
    }
    return n;
}

/* Parse the clean block buf[0:len] (ending in a newline): field f of each line goes to column
 * want[f] of out (column-major, room lines a column: out[col * room + line]) when want[f] >=
 * 0. Returns the lines parsed, -1 when the block is not clean, -2 when it has more than room
 * lines. */
static ptrdiff_t ss_parse_csv(const unsigned char *buf, ptrdiff_t len, int ncols,
                              const int32_t *want, unsigned char delim, double *out,
                              ptrdiff_t room) {
    const unsigned char *p = buf, *end = buf + len;
    ptrdiff_t row = 0;
    if (len < 1 || end[-1] != '\n') return -1;
    while (p < end) {
        if (row >= room) return -2;
        int field = 0;
        for (;;) {
            int32_t w = want[field];
            if (w >= 0) {
                double v;
                if (!ss_number(p, &p, &v)) return -1;
                out[(ptrdiff_t)w * room + row] = v;
            } else {
                unsigned char c;
                while ((c = *p) != delim && c != '\n') {
                    if (c == '"' || c == '\r' || c >= 0x80) {
                        if (c == '\r' && p[1] == '\n') break;
                        return -1;
                    }
                    p++;
                }
            }
            if (*p == delim) {
                if (++field >= ncols) return -1;
                p++;
                continue;
            }
            if (field != ncols - 1) return -1;
            if (*p == '\r') p++; /* (a number or a field ends there only before '\n') */
            if (*p != '\n') return -1; /* a number followed by another character */
            p++;
            break;
        }
        row++;
    }
    return row;
}

#endif
