/* PrivHP's ingest loops in C (included by _privhp.pyx, which checks every argument first).
 *
 * MurmurHash3 x86_32 of 8-byte keys in blocks, each step in a loop of its own over 32-bit
 * lanes so that the compiler vectorises it; the bucket additions in a loop of their own.
 * Every increment is an integer sum: the state equals the numpy path's bit for bit. */
#ifndef SKETCHSYN_PRIVHP_H
#define SKETCHSYN_PRIVHP_H

#include <stdint.h>
#include <stddef.h>

#define SS_BLOCK 2048

/* On x86-64 with GCC or clang (and an ifunc-capable loader), the hash loops are compiled twice,
 * for AVX2 and for the baseline, and the loader picks one at import (glibc's ifunc): a wheel
 * runs everywhere and uses AVX2 where the CPU has it. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__GLIBC__) && !defined(SS_NO_CLONES)
#define SS_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SS_CLONES
#endif

static inline uint32_t ss_rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

/* rotl(mix(k), 13): a 4-byte block's share of its round (the same for every seed). */
static inline uint32_t ss_mix(uint32_t k) {
    k *= 0xCC9E2D51u;
    k = ss_rotl(k, 15);
    return ss_rotl(k * 0x1B873593u, 13);
}

/* out[i] = MurmurHash3 x86_32(seed) of the 8-byte key whose halves, mixed by ss_mix, are
 * low[i] and high[i] (high NULL: keys below 2**32, whose high half mixes to 0), i < m. */
SS_CLONES static void ss_hashes(const uint32_t *low, const uint32_t *high, ptrdiff_t m,
                                uint32_t seed, uint32_t *out) {
    const uint32_t rs = ss_rotl(seed, 13);
    ptrdiff_t i;
    if (high) {
        for (i = 0; i < m; i++) {
            uint32_t h = (rs ^ low[i]) * 5u + 0xE6546B64u;
            out[i] = (ss_rotl(h, 13) ^ high[i]) * 5u + 0xE6546B64u;
        }
    } else {
        for (i = 0; i < m; i++) {
            uint32_t h = (rs ^ low[i]) * 5u + 0xE6546B64u;
            out[i] = ss_rotl(h, 13) * 5u + 0xE6546B64u;
        }
    }
    for (i = 0; i < m; i++) {
        uint32_t h = out[i] ^ 8u;
        h ^= h >> 16;
        h *= 0x85EBCA6Bu;
        h ^= h >> 13;
        h *= 0xC2B2AE35u;
        out[i] = h ^ (h >> 16);
    }
}

SS_CLONES static void ss_mix_all(const uint32_t *in, ptrdiff_t m, uint32_t *out) {
    for (ptrdiff_t i = 0; i < m; i++) out[i] = ss_mix(in[i]);
}

SS_CLONES static void ss_buckets(uint32_t *b, ptrdiff_t m, uint64_t width, uint32_t shift) {
    ptrdiff_t i;
    if (shift) {
        for (i = 0; i < m; i++) b[i] >>= shift;
    } else {
        for (i = 0; i < m; i++) b[i] = (uint32_t)(((uint64_t)b[i] * width) >> 32);
    }
}

/* The scratch of one block: mixed halves, buckets, sign hashes. */
typedef struct {
    uint32_t mlow[SS_BLOCK], mhigh[SS_BLOCK], buckets[SS_BLOCK], flips[SS_BLOCK];
} ss_scratch;

/* Add weights[i] (negated where a Count Sketch's sign hash is odd; weights NULL: 1) to the
 * bucket of key i (halves low[i], high[i]; high NULL below 2**32) in each of the rows
 * (out + row*stride, seeds[row], signs[row] when signs is not NULL), i < m <= SS_BLOCK. */
static void ss_flush(const uint32_t *low, const uint32_t *high, const int64_t *weights,
                     ptrdiff_t m, ptrdiff_t rows, const uint32_t *seeds, const uint32_t *signs,
                     uint64_t width, uint32_t shift, int64_t *out, ptrdiff_t stride,
                     ss_scratch *s) {
    ss_mix_all(low, m, s->mlow);
    if (high) ss_mix_all(high, m, s->mhigh);
    const uint32_t *mh = high ? s->mhigh : NULL;
    for (ptrdiff_t row = 0; row < rows; row++) {
        int64_t *o = out + row * stride;
        ss_hashes(s->mlow, mh, m, seeds[row], s->buckets);
        ss_buckets(s->buckets, m, width, shift);
        const uint32_t *b = s->buckets;
        ptrdiff_t i;
        if (signs) {
            ss_hashes(s->mlow, mh, m, signs[row], s->flips);
            if (weights) {
                for (i = 0; i < m; i++) o[b[i]] += (s->flips[i] & 1u) ? -weights[i] : weights[i];
            } else {
                for (i = 0; i < m; i++) o[b[i]] += (s->flips[i] & 1u) ? -1 : 1;
            }
        } else if (weights) {
            for (i = 0; i < m; i++) o[b[i]] += weights[i];
        } else {
            for (i = 0; i < m; i++) o[b[i]] += 1;
        }
    }
}

/* Every item's prefix codes[i] >> shift (wide: may reach 2**32) into its bucket of every row. */
static void ss_hash_items(const uint64_t *codes, ptrdiff_t n, uint64_t shift, int wide,
                          ptrdiff_t rows, const uint32_t *seeds, const uint32_t *signs,
                          uint64_t width, uint32_t bshift, int64_t *out, ptrdiff_t stride,
                          ss_scratch *s, uint32_t *low, uint32_t *high) {
    for (ptrdiff_t a = 0; a < n; a += SS_BLOCK) {
        ptrdiff_t m = n - a < SS_BLOCK ? n - a : SS_BLOCK;
        const uint64_t *c = codes + a;
        for (ptrdiff_t i = 0; i < m; i++) low[i] = (uint32_t)(c[i] >> shift);
        if (wide)
            for (ptrdiff_t i = 0; i < m; i++) high[i] = (uint32_t)((c[i] >> shift) >> 32);
        ss_flush(low, wide ? high : NULL, NULL, m, rows, seeds, signs, width, bshift, out, stride,
                 s);
    }
}

/* counts[codes[i] >> shift] += 1; returns the first i whose cell is past ncells (n: none). */
static ptrdiff_t ss_histogram(const uint64_t *codes, ptrdiff_t n, uint64_t shift, int64_t *counts,
                              uint64_t ncells) {
    for (ptrdiff_t i = 0; i < n; i++) {
        uint64_t c = codes[i] >> shift;
        if (c >= ncells) return i;
        counts[c] += 1;
    }
    return n;
}

/* The non-empty cells of counts in order (indices in keys, counts in weights, each of at
 * least min(ncells, sum) + 1 entries); returns how many; counts is left all zero. Branch-free:
 * every cell is written, only a non-empty one is kept. */
static ptrdiff_t ss_nonzero(int64_t *counts, ptrdiff_t ncells, uint32_t *keys, int64_t *weights,
                            ptrdiff_t room) {
    ptrdiff_t m = 0;
    for (ptrdiff_t c = 0; c < ncells; c++) {
        int64_t v = counts[c];
        counts[c] = 0;
        if (m >= room) { /* (more non-empty cells than the caller promised room for) */
            if (v) return -1;
            continue;
        }
        keys[m] = (uint32_t)c;
        weights[m] = v;
        m += (v != 0);
    }
    return m;
}

/* The cells one level up of the m >= 1 sorted cells (in place, counts summed). */
static ptrdiff_t ss_parents(uint32_t *keys, int64_t *weights, ptrdiff_t m) {
    uint32_t prev = keys[0] >> 1;
    int64_t acc = weights[0];
    ptrdiff_t w = 0;
    for (ptrdiff_t i = 1; i < m; i++) {
        uint32_t p = keys[i] >> 1;
        keys[w] = prev;
        weights[w] = acc;
        ptrdiff_t fresh = (p != prev);
        w += fresh;
        acc = weights[i] + acc * (1 - fresh);
        prev = p;
    }
    keys[w] = prev;
    weights[w] = acc;
    return w + 1;
}

/* Morton spreading of an axis' cell index (bit j to bit d*j), as sketchsyn.domains.morton. */
static inline uint64_t ss_spread2(uint64_t x) {
    x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
    x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
    x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0Full;
    x = (x | (x << 2)) & 0x3333333333333333ull;
    return (x | (x << 1)) & 0x5555555555555555ull;
}

static inline uint64_t ss_spread3(uint64_t x) {
    x = (x | (x << 32)) & 0x001F00000000FFFFull;
    x = (x | (x << 16)) & 0x001F0000FF0000FFull;
    x = (x | (x << 8)) & 0x100F00F00F00F00Full;
    x = (x | (x << 4)) & 0x10C30C30C30C30C3ull;
    return (x | (x << 2)) & 0x1249249249249249ull;
}

/* One axis' cell indices (col: every row's value of the axis, step apart) into q; returns the
 * rows outside the box (or not finite). The test of Box.encode: inside when
 * 0 <= x - lower <= span and not (x - lower == span < x - upper). Branch-free, one loop per
 * form of the index (t / divide, or (t / span) * scale: the domain's arithmetic) and for
 * contiguous columns (vectorised) or strided ones. */
#define SS_QUANTISE_LOOP(QT, X, V)                                                               \
    for (ptrdiff_t r = 0; r < n; r++) {                                                          \
        double x = X, t = x - lower, v = V;                                                      \
        bad += (ptrdiff_t)(((t >= 0.0) & (t <= span)) ^ 1) + (ptrdiff_t)((t == span) & (x > upper)); \
        v = v < top ? v : top;                                                                   \
        q[r] = (QT##_t)(v > 0.0 ? v : 0.0);                                                      \
    }
#define SS_QUANTISE(QT)                                                                          \
    SS_CLONES static ptrdiff_t ss_quantise_##QT(const double *col, ptrdiff_t step, ptrdiff_t n, \
                                                double lower, double upper, double span,        \
                                                double divide, double scale, double top,        \
                                                QT##_t *q) {                                     \
        ptrdiff_t bad = 0;                                                                       \
        if (step == 1 && divide != 0.0) {                                                        \
            SS_QUANTISE_LOOP(QT, col[r], t / divide)                                             \
        } else if (step == 1) {                                                                  \
            SS_QUANTISE_LOOP(QT, col[r], (t / span) * scale)                                     \
        } else if (divide != 0.0) {                                                              \
            SS_QUANTISE_LOOP(QT, col[r * step], t / divide)                                      \
        } else {                                                                                 \
            SS_QUANTISE_LOOP(QT, col[r * step], (t / span) * scale)                              \
        }                                                                                        \
        return bad;                                                                              \
    }
SS_QUANTISE(int32)
SS_QUANTISE(int64)

/* codes[r] = OR over the d <= 3 axes of spread(q[i][r]) << shift[i] (q: d rows of n, row
 * stride qs elements): the Morton code of Box.encode. */
#define SS_MORTON(QT)                                                                            \
    SS_CLONES static void ss_morton_##QT(const QT##_t *q, ptrdiff_t qs, int d, ptrdiff_t n,     \
                                         const uint64_t *shift, uint64_t *codes) {              \
        const QT##_t *a = q, *b = q + qs, *c = q + 2 * qs;                                       \
        uint64_t s0 = shift[0], s1 = d > 1 ? shift[1] : 0, s2 = d > 2 ? shift[2] : 0;           \
        if (d == 1) {                                                                            \
            for (ptrdiff_t r = 0; r < n; r++) codes[r] = (uint64_t)a[r];                          \
        } else if (d == 2) {                                                                     \
            for (ptrdiff_t r = 0; r < n; r++)                                                    \
                codes[r] = (ss_spread2((uint64_t)a[r]) << s0) | (ss_spread2((uint64_t)b[r]) << s1); \
        } else {                                                                                 \
            for (ptrdiff_t r = 0; r < n; r++)                                                    \
                codes[r] = (ss_spread3((uint64_t)a[r]) << s0) |                                  \
                           (ss_spread3((uint64_t)b[r]) << s1) | (ss_spread3((uint64_t)c[r]) << s2); \
        }                                                                                        \
    }
SS_MORTON(int32)
SS_MORTON(int64)

#endif
