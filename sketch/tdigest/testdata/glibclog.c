/* Writes glibclog.txt: x and glibc's log(x), as IEEE bits in hex: every
 * integer 2..2048, every 997th up to 2e6, powers of two and neighbours,
 * integers of every magnitude up to 2^64, values near 1, subnormals, any
 * positive doubles, and the special values. TestGlibcLog checks glibcLog
 * against them. Build and run on the reference machine (glibc 2.36,
 * x86-64 with FMA and AVX2, where libm's ifunc picks __log_fma for
 * redis-server too):
 *     gcc -O2 -o /tmp/glibclog glibclog.c -lm && /tmp/glibclog > glibclog.txt
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint64_t s = 88172645463325252ULL;
static uint64_t next(void) { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
static void put(double x) {
    double y = log(x);
    uint64_t a, b;
    memcpy(&a, &x, 8);
    memcpy(&b, &y, 8);
    printf("%016llx %016llx\n", (unsigned long long)a, (unsigned long long)b);
}
static double d(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }

int main(void) {
    for (long i = 2; i <= 2048; i++) put((double)i);
    for (long i = 2049; i <= 2000000; i += 997) put((double)i);
    for (int e = 1; e < 64; e++) {
        double p = ldexp(1.0, e);
        put(p); put(nextafter(p, 0)); put(nextafter(p, INFINITY)); put(p + 1); put(p - 1);
    }
    for (int i = 0; i < 1500; i++) {            /* integers of every magnitude up to 2^64 */
        int b = 2 + next() % 63;
        uint64_t v = next() >> (64 - b);
        put((double)(v < 2 ? 2 : v));
    }
    for (int i = 0; i < 1000; i++) {            /* near 1 */
        uint64_t lo = 0x3fee000000000000ULL, hi = 0x3ff1090000000000ULL;
        put(d(lo + next() % (hi - lo)));
    }
    for (int i = 0; i < 300; i++) put(d(next() & 0x000fffffffffffffULL)); /* subnormal */
    for (int i = 0; i < 1500; i++) put(d(next() & 0x7fefffffffffffffULL)); /* any positive finite */
    put(1.0); put(0.0); put(-0.0); put(-1.0); put(INFINITY); put(-INFINITY); put(NAN);
    put(5e-324); put(2.2250738585072014e-308); put(1.7976931348623157e308);
    return 0;
}
