#include "vc_hash.h"

#include <endian.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

static unsigned char process_key[16];
static uv_once_t process_key_once = UV_ONCE_INIT;

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

/* 8 bytes at p as a little-endian number: one load (gcc built the key's from 8 bytes apart). */
static uint64_t load_le64(const unsigned char *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
    return le64toh(v);
}

/* SipHash-c-d: c rounds per 8-byte block, d to finish (the compiler unrolls both). */
static inline uint64_t siphash(const unsigned char key[16], const void *data, size_t len, int c,
                               int d)
{
    const unsigned char *in = data, *end = in + (len - len % 8);
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    uint64_t b = (uint64_t)len << 56, m;

    for (; in != end; in += 8) {
        m = load_le64(in);
        v3 ^= m;
        for (int i = 0; i < c; i++)
            SIPROUND;
        v0 ^= m;
    }
    for (size_t i = 0; i < len % 8; i++)
        b |= (uint64_t)in[i] << (8 * i);
    v3 ^= b;
    for (int i = 0; i < c; i++)
        SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    for (int i = 0; i < d; i++)
        SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t vc_siphash24(const unsigned char key[16], const void *data, size_t len)
{
    return siphash(key, data, len, 2, 4);
}

uint64_t vc_siphash13(const unsigned char key[16], const void *data, size_t len)
{
    return siphash(key, data, len, 1, 3);
}

static void draw_process_key(void)
{
    size_t got = 0;

    while (got < sizeof(process_key)) {
        ssize_t n = getrandom(process_key + got, sizeof(process_key) - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got < sizeof(process_key)) {
        /*
         * No getrandom() (an old kernel or a seccomp filter): a key from the
         * clock and the pid is still unknown outside, if weaker.
         */
        struct timespec ts;
        uint64_t mix[2];
        clock_gettime(CLOCK_REALTIME, &ts);
        mix[0] = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30);
        mix[1] = (uint64_t)getpid() ^ (uint64_t)(uintptr_t)&ts;
        memcpy(process_key, mix, sizeof(process_key));
    }
}

uint64_t vc_hash_str(const char *s)
{
    uv_once(&process_key_once, draw_process_key);
    return vc_siphash13(process_key, s, strlen(s));
}
