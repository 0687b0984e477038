/* The operating system's CSPRNG for compiled loops: ss_os_fill(buf, n) fills n bytes or
 * returns -1. SS_HAVE_OSRANDOM is 0 where there is none the loops can call without the GIL
 * (the callers then keep their Python paths and os.urandom). */
#ifndef SKETCHSYN_OSRANDOM_H
#define SKETCHSYN_OSRANDOM_H
#include <stddef.h>
#include <stdint.h>
#include <errno.h>

#if defined(__linux__)
#include <unistd.h>
#include <sys/syscall.h>
#if defined(SYS_getrandom)
#define SS_HAVE_OSRANDOM 1
/* getrandom(2) by its system call (glibc before 2.25 has no wrapper): a short or interrupted
 * read is retried. */
static int ss_os_fill(void *buf, size_t n) {
    unsigned char *p = (unsigned char *)buf;
    long failed = 0;
    while (n) {
        long got = syscall(SYS_getrandom, p, n, 0);
        if (got > 0) {
            p += got;
            n -= (size_t)got;
            failed = 0;
        } else if (++failed > 1000000 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
            return -1;
        }
    }
    return 0;
}
#endif
#elif defined(__APPLE__) || defined(__OpenBSD__) || defined(__FreeBSD__)
#include <unistd.h>
#if defined(__APPLE__)
#include <sys/random.h>
#endif
#define SS_HAVE_OSRANDOM 1
/* getentropy(2): at most 256 bytes a call. */
static int ss_os_fill(void *buf, size_t n) {
    unsigned char *p = (unsigned char *)buf;
    while (n) {
        size_t k = n < 256 ? n : 256;
        if (getentropy(p, k) != 0) return -1;
        p += k;
        n -= k;
    }
    return 0;
}
#endif

#ifndef SS_HAVE_OSRANDOM
#define SS_HAVE_OSRANDOM 0
static int ss_os_fill(void *buf, size_t n) { (void)buf; (void)n; return -1; }
#endif

#endif
