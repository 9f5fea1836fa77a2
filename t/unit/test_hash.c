/*
 * test_hash.c - murmur3 and the rollout bucket (docs/evaluation.md), and the JSON
 * writing helpers (escape, milli-percent numbers, UTC timestamps).
 */

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "flags_core.h"

static void test_murmur3_vectors(void **state)
{
    (void) state;
    assert_int_equal(fl_murmur3_32("hello", 5, 0), 0x248bfa47u);
    /* reference values of murmur3_x86_32 */
    assert_int_equal(fl_murmur3_32("", 0, 0), 0u);
    assert_int_equal(fl_murmur3_32("", 0, 1), 0x514e28b7u);
    assert_int_equal(fl_murmur3_32("hello, world", 12, 0), 0x149bbb7fu);
    assert_int_equal(fl_murmur3_32("The quick brown fox jumps over the lazy dog",
                                   43, 0), 0x2e4ff723u);
    assert_int_equal(fl_murmur3_32("abc", 3, 0), 0xb3dd93fau);
}

/* fl_hash64, the memo's key hash: the length and the seed are part of
 * it (a trailing zero byte or another answer kind is another key), every
 * byte counts, and the set index (both halves folded, as the memo takes
 * it) spreads 100,000 callers' queries over 2,048 sets as evenly as
 * chance would. */
static void test_hash64(void **state)
{
    (void) state;
    static const char z[16] = "ab";
    static unsigned counts[2048];
    char q[160];

    assert_true(fl_hash64("ab", 2, 1) == fl_hash64("ab", 2, 1));
    assert_true(fl_hash64(z, 2, 1) != fl_hash64(z, 3, 1));
    assert_true(fl_hash64(z, 8, 1) != fl_hash64(z, 9, 1));
    assert_true(fl_hash64("ab", 2, 1) != fl_hash64("ab", 2, 2));
    assert_true(fl_hash64("", 0, 1) != fl_hash64("", 0, 2));

    /* one bit flipped anywhere in 40 bytes changes the hash */
    memset(q, 'q', 40);
    uint64_t h = fl_hash64(q, 40, 7);
    for (size_t i = 0; i < 40; i++) {
        for (int b = 0; b < 8; b++) {
            q[i] ^= (char) (1 << b);
            assert_true(fl_hash64(q, 40, 7) != h);
            q[i] ^= (char) (1 << b);
        }
    }

    memset(counts, 0, sizeof(counts));
    for (unsigned u = 1; u <= 100000; u++) {
        int n = snprintf(q, sizeof(q), "userId=bench-user-%u&trait_plan=pro"
                         "&trait_country=de&trait_sessions=42", u);
        uint64_t k = fl_hash64(q, (size_t) n, 1) & 0xffffffff00000000ULL;
        counts[((uint32_t) (k >> 32) ^ 0x5bd1e995u) & 2047]++;
    }
    /* as a random spread would: chi-square over 2,047 degrees of freedom
     * (mean 2,047, deviation 64) under six deviations above its mean,
     * and no set with twice the mean of 48.8 */
    double e = 100000.0 / 2048, chi2 = 0;
    for (size_t i = 0; i < 2048; i++) {
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
        assert_true(counts[i] < 98);
    }
    assert_true(chi2 < 2047 + 6 * 64);
}

static void test_bucket_vectors(void **state)
{
    (void) state;
    assert_int_equal(fl_bucket("new-checkout", 12, "user-1", 6), 40631);
    assert_int_equal(fl_bucket("new-checkout", 12, "user-2", 6), 10789);
    assert_int_equal(fl_bucket("dark-mode", 9, "alice", 5), 89895);
}

/* The streaming hash of name ":" key equals the hash of the concatenation
 * for every split of the tail bytes. */
static void test_bucket_matches_concatenation(void **state)
{
    char name[16], key[2048], all[2100];
    (void) state;

    for (size_t nl = 0; nl < 9; nl++) {
        for (size_t kl = 0; kl < 2000; kl += (kl < 16 ? 1 : 97)) {
            for (size_t i = 0; i < nl; i++) name[i] = (char) ('a' + i);
            for (size_t i = 0; i < kl; i++) key[i] = (char) ('0' + i % 43);
            memcpy(all, name, nl);
            all[nl] = ':';
            memcpy(all + nl + 1, key, kl);
            assert_int_equal(fl_bucket(name, nl, key, kl),
                             fl_murmur3_32(all, nl + 1 + kl, 0) % 100000);
        }
    }
}

/* 1,000,000 ids: every tenth of the bucket range holds 10 % +- 1 %. */
static void test_bucket_distribution(void **state)
{
    unsigned counts[10] = {0};
    char key[32];
    (void) state;

    for (unsigned i = 0; i < 1000000; i++) {
        int n = snprintf(key, sizeof(key), "user-%u", i);
        uint32_t b = fl_bucket("new-checkout", 12, key, (size_t) n);
        assert_true(b < FL_BUCKETS);
        counts[b / 10000]++;
    }
    for (int d = 0; d < 10; d++) {
        assert_in_range(counts[d], 99000, 101000);
    }
}

static void test_json_escape(void **state)
{
    char out[256];
    size_t n;
    const char in[] = "a\"b\\c\n\r\t\b\f\x01\x1f z\xe2\x80\xa8\xe2\x80\xa9"
                      "\xe2\x82\xac\xe2\x80";
    (void) state;

    assert_true(fl_json_escape_bound(sizeof(in) - 1) <= sizeof(out));
    n = fl_json_escape(in, sizeof(in) - 1, out);
    out[n] = '\0';
    assert_string_equal(out,
        "a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f z\\u2028\\u2029"
        "\xe2\x82\xac\\ufffd");                 /* a cut sequence: U+FFFD */

    /* worst case fits the bound */
    char ctl[10], big[60];
    memset(ctl, 1, sizeof(ctl));
    assert_int_equal(fl_json_escape(ctl, sizeof(ctl), big), 60);
    assert_int_equal(fl_json_escape_bound(10), 60);
    assert_int_equal(fl_json_escape("", 0, big), 0);
}

static void escape_is(const char *in, size_t len, const char *want)
{
    char out[256];
    size_t n;

    assert_true(fl_json_escape_bound(len) <= sizeof(out));
    n = fl_json_escape(in, len, out);
    assert_true(n <= fl_json_escape_bound(len));
    out[n] = '\0';
    assert_string_equal(out, want);
}

#define ESCAPE_IS(in, want)  escape_is(in, sizeof(in) - 1, want)

/* The output is always UTF-8: each maximal ill-formed part becomes one
 * \ufffd; well-formed sequences are copied as they are. */
static void test_json_escape_invalid_utf8(void **state)
{
    char ff[10], big[60];
    (void) state;

    /* overlong forms */
    ESCAPE_IS("\xc0\x80", "\\ufffd\\ufffd");
    ESCAPE_IS("a\xc1\xbf" "b", "a\\ufffd\\ufffdb");
    ESCAPE_IS("\xe0\x80\x80", "\\ufffd\\ufffd\\ufffd");
    ESCAPE_IS("\xf0\x8f\xbf\xbf", "\\ufffd\\ufffd\\ufffd\\ufffd");
    /* surrogates */
    ESCAPE_IS("\xed\xa0\x80", "\\ufffd\\ufffd\\ufffd");
    ESCAPE_IS("\xed\xb0\x80x", "\\ufffd\\ufffd\\ufffdx");
    /* past U+10FFFF, bytes that never appear */
    ESCAPE_IS("\xf4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd");
    ESCAPE_IS("\xf5\xff\xfe", "\\ufffd\\ufffd\\ufffd");
    /* stray continuation, cut sequences (one U+FFFD for the cut part) */
    ESCAPE_IS("\x80\xbf", "\\ufffd\\ufffd");
    ESCAPE_IS("\xe2\x82", "\\ufffd");
    ESCAPE_IS("\xe2\x82x", "\\ufffdx");
    ESCAPE_IS("\xf0\x9f\x98\"", "\\ufffd\\\"");
    ESCAPE_IS("\xf0\x9f\x98\xf0\x9f\x98\x80", "\\ufffd\xf0\x9f\x98\x80");

    /* well-formed, at the edges of the ranges, kept */
    ESCAPE_IS("\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80"
              "\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf",
              "\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80"
              "\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf");
    ESCAPE_IS("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
              "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    /* a NUL byte is escaped, not an end */
    ESCAPE_IS("a\0b", "a\\u0000b");

    /* ill-formed bytes fit the bound too */
    memset(ff, 0xff, sizeof(ff));
    assert_int_equal(fl_json_escape(ff, sizeof(ff), big), 60);
}

static void check_milli(uint32_t milli, const char *want)
{
    char out[16];
    size_t n = fl_json_milli(milli, out);
    assert_true(n <= 8);
    out[n] = '\0';
    assert_string_equal(out, want);
}

static void test_json_milli(void **state)
{
    (void) state;
    check_milli(0, "0");
    check_milli(1, "0.001");
    check_milli(10, "0.01");
    check_milli(120, "0.12");
    check_milli(12500, "12.5");
    check_milli(25000, "25");
    check_milli(33333, "33.333");
    check_milli(99999, "99.999");
    check_milli(100000, "100");
    check_milli(4000000000u, "100");    /* clamped */
}

static void check_time(uint64_t ms, const char *want)
{
    char out[32];
    assert_int_equal(fl_format_time_ms(ms, out), 24);
    out[24] = '\0';
    assert_string_equal(out, want);
}

static void test_format_time(void **state)
{
    (void) state;
    check_time(0, "1970-01-01T00:00:00.000Z");
    check_time(1795871109123ull, "2026-11-28T13:05:09.123Z");
    check_time(1795352709123ull, "2026-11-22T13:05:09.123Z");
    check_time(951782400000ull, "2000-02-29T00:00:00.000Z");
    check_time(951868799999ull, "2000-02-29T23:59:59.999Z");
    check_time(4107542400000ull, "2100-03-01T00:00:00.000Z");
    check_time(1709164800001ull, "2024-02-29T00:00:00.001Z");
    check_time(253402300799999ull, "9999-12-31T23:59:59.999Z");
}

/* The fixed-shape messages: error bodies (HTTP and WebSocket) and the
 * OFREP stream event, each within its bound. */
static void test_messages(void **state)
{
    (void) state;
    char buf[256];
    const char msg[] = "bad \"x\"\n\0end";
    size_t bound = fl_error_json_bound(12, sizeof(msg) - 1);
    size_t n = fl_error_json(0, "invalid_json", msg, sizeof(msg) - 1, buf);

    assert_true(n <= bound);
    assert_int_equal(n, strlen("{\"error\":\"invalid_json\",\"message\":\"bad \\\"x\\\"\\n\\u0000end\"}"));
    assert_memory_equal(buf, "{\"error\":\"invalid_json\",\"message\":\"bad \\\"x\\\"\\n\\u0000end\"}", n);

    n = fl_error_json(1, "invalid_field", "type is required", 16, buf);
    assert_true(n <= fl_error_json_bound(13, 16));
    buf[n] = '\0';
    assert_string_equal(buf, "{\"type\":\"error\",\"error\":\"invalid_field\",\"message\":\"type is required\"}");

    n = fl_sse_refetch_event(UINT64_MAX, buf);
    assert_true(n <= FL_SSE_EVENT_MAX);
    buf[n] = '\0';
    assert_string_equal(buf, "data: {\"type\":\"refetchEvaluation\",\"etag\":\"18446744073709551615\"}\n\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_murmur3_vectors),
        cmocka_unit_test(test_hash64),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_bucket_vectors),
        cmocka_unit_test(test_bucket_matches_concatenation),
        cmocka_unit_test(test_bucket_distribution),
        cmocka_unit_test(test_json_escape),
        cmocka_unit_test(test_json_escape_invalid_utf8),
        cmocka_unit_test(test_json_milli),
        cmocka_unit_test(test_format_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
