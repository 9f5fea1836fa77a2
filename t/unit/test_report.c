/*
 * test_report.c - the streaming error report parser (docs/http-api.md)
 * and the line written to flags_error_log.
 *
 * Every body is parsed three ways (whole, one byte at a time, in 7-byte
 * pieces) and the three results must agree.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "flags_core.h"

#include "unit_arena.h"


/* --------------------------------------------------------------- helpers */

typedef struct {
    fl_status_t  rc;
    fl_status_t  feed_rc;       /* the last feed's */
    fl_report_t  r;
    char         err[256];
} result;

/* chunk 0: the whole body through fl_report_parser_feed_whole() */
static result parse_chunked(const char *body, size_t len, size_t chunk)
{
    result res;
    memset(&res, 0, sizeof(res));

    /* The allocator struct given to new() may go away: the parser must
     * have kept its own copy. */
    fl_alloc_t a = arena;
    fl_report_parser_t *p = fl_report_parser_new(&a);
    memset(&a, 0, sizeof(a));
    assert_non_null(p);

    res.feed_rc = FL_OK;
    if (chunk == 0) {
        res.feed_rc = fl_report_parser_feed_whole(p, (const unsigned char *) body, len);
        len = 0;
    }
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        res.feed_rc = fl_report_parser_feed(p, (const unsigned char *) body + off, n);
        if (res.feed_rc != FL_OK) {
            break;
        }
    }
    res.rc = fl_report_parser_finish(p, &res.r, res.err, sizeof(res.err));
    return res;
}

static void same_str(const char *a, size_t alen, const char *b, size_t blen)
{
    if (a == NULL || b == NULL) {
        assert_ptr_equal(a, b);
        return;
    }
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
}

/* The log line of r in a buffer of exactly fl_report_log_bound() bytes
 * (the caller frees it): a write past the bound is the sanitizers' to
 * see, a length over it fails here.  *n: its length. */
static char *line_of(const fl_report_t *r, const char *project,
    uint64_t now_ms, size_t *n)
{
    size_t bound = fl_report_log_bound(r, strlen(project));
    char *buf = malloc(bound);
    assert_non_null(buf);
    *n = fl_report_log_line(r, project, strlen(project), now_ms, buf);
    assert_true(*n <= bound);
    return buf;
}

/* Parses body whole (fed, and through the fast path), byte by byte and
 * in pieces; all four must agree, their log lines byte for byte, and the
 * two whole ones word every error alike. */
static result parse_n(const char *body, size_t len)
{
    result whole = parse_chunked(body, len, len == 0 ? 1 : len);
    result fast = parse_chunked(body, len, 0);
    size_t sizes[] = { 0, 1, 7 };

    assert_int_equal(fast.rc, whole.rc);
    assert_string_equal(fast.err, whole.err);

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        result other = parse_chunked(body, len, sizes[i]);
        assert_int_equal(other.rc, whole.rc);
        if (whole.rc == FL_OK) {
            same_str(other.r.flag_name, other.r.flag_name_len,
                     whole.r.flag_name, whole.r.flag_name_len);
            same_str(other.r.message, other.r.message_len,
                     whole.r.message, whole.r.message_len);
            same_str(other.r.stack, other.r.stack_len,
                     whole.r.stack, whole.r.stack_len);
            same_str(other.r.user_id, other.r.user_id_len,
                     whole.r.user_id, whole.r.user_id_len);
            same_str(other.r.traits_json, other.r.traits_json_len,
                     whole.r.traits_json, whole.r.traits_json_len);
            assert_int_equal(other.r.has_enabled, whole.r.has_enabled);
            assert_int_equal(other.r.enabled, whole.r.enabled);

            size_t an, bn;
            char *a = line_of(&other.r, "p", 1795352709123ULL, &an);
            char *b = line_of(&whole.r, "p", 1795352709123ULL, &bn);
            same_str(a, an, b, bn);
            free(a);
            free(b);
        } else if (whole.rc == FL_ERR_FIELD
                   || strncmp(whole.err, "request body is not valid JSON", 30) != 0)
        {
            /* Syntax messages carry a byte offset that depends on where
             * yajl noticed; every other message is exact. */
            assert_string_equal(other.err, whole.err);
        }
    }
    return whole;
}

static result parse(const char *body)
{
    return parse_n(body, strlen(body));
}

static void expect_err(const char *body, fl_status_t rc, const char *msg)
{
    result res = parse(body);
    if (res.rc != rc || (msg != NULL && strcmp(res.err, msg) != 0)) {
        fail_msg("body %s: got %d \"%s\", want %d \"%s\"", body, res.rc, res.err,
                 rc, msg == NULL ? "(any)" : msg);
    }
}

static void expect_field(const char *body, const char *msg)
{
    expect_err(body, FL_ERR_FIELD, msg);
}

static void expect_json(const char *body, const char *msg)
{
    expect_err(body, FL_ERR_JSON, msg);
}

static void expect_str(const char *got, size_t got_len, const char *want)
{
    assert_non_null(got);
    assert_int_equal(got_len, strlen(want));
    assert_memory_equal(got, want, got_len);
    assert_int_equal(got[got_len], '\0');       /* NUL-terminated too */
}

#define TRAITS_MSG " must be a string, number, boolean or null"


/* ----------------------------------------------------------- valid bodies */

static void test_full_report(void **state)
{
    (void) state;
    result res = parse(
        "{\"flagName\":\"new-checkout\",\"message\":\"TypeError: x is undefined\","
        "\"stack\":\"at a.js:1\\nat b.js:2\",\"userId\":\"user-1\","
        "\"traits\":{\"plan\":\"pro\",\"n\":-1.5e+3,\"b\":true,\"f\":false,\"z\":null,"
        "\"i\":42}}");

    assert_int_equal(res.rc, FL_OK);
    expect_str(res.r.flag_name, res.r.flag_name_len, "new-checkout");
    expect_str(res.r.message, res.r.message_len, "TypeError: x is undefined");
    expect_str(res.r.stack, res.r.stack_len, "at a.js:1\nat b.js:2");
    expect_str(res.r.user_id, res.r.user_id_len, "user-1");
    expect_str(res.r.traits_json, res.r.traits_json_len,
               "{\"plan\":\"pro\",\"n\":-1.5e+3,\"b\":true,\"f\":false,\"z\":null,\"i\":42}");
}

static void test_minimal_report(void **state)
{
    (void) state;
    result res = parse(" \r\n\t{\"message\":\"m\",\"flagName\":\"f\"} \n");

    assert_int_equal(res.rc, FL_OK);
    expect_str(res.r.flag_name, res.r.flag_name_len, "f");
    expect_str(res.r.message, res.r.message_len, "m");
    assert_null(res.r.stack);
    assert_null(res.r.user_id);
    assert_null(res.r.traits_json);
    assert_int_equal(res.r.traits_json_len, 0);
}

static void test_null_optional_is_absent(void **state)
{
    (void) state;
    result res = parse("{\"flagName\":\"f\",\"message\":\"m\",\"stack\":null,"
                       "\"userId\":null,\"traits\":null}");

    assert_int_equal(res.rc, FL_OK);
    assert_null(res.r.stack);
    assert_null(res.r.user_id);
    assert_null(res.r.traits_json);
}

static void test_decoded_strings(void **state)
{
    (void) state;
    result res = parse("{\"flagName\":\"f\\u002dx\",\"message\":\"a\\\"b\\\\c\\/"
                       "\\u00e9\\u20ac\\ud83d\\ude00\\t\\u0000z\","
                       "\"stack\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}");

    assert_int_equal(res.rc, FL_OK);
    expect_str(res.r.flag_name, res.r.flag_name_len, "f-x");
    assert_int_equal(res.r.message_len, 18);
    assert_memory_equal(res.r.message,
                        "a\"b\\c/\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\t\0z", 18);
    expect_str(res.r.stack, res.r.stack_len, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
}

/* body through the fast path, accepted; parse() first holds it to yajl
 * (its chunk 0 is the fast path, log line included) */
static result fast_ok(const char *body)
{
    result whole = parse(body);
    result fast = parse_chunked(body, strlen(body), 0);

    assert_int_equal(whole.rc, FL_OK);
    assert_int_equal(fast.rc, FL_OK);
    return fast;
}

/* A message or stack whose escapes are the ones fl_json_escape() writes
 * is copied into the log line as the body wrote it (message_json,
 * stack_json); any other escape, or a byte over 0x7f anywhere in the body,
 * leaves it to be escaped again.  The line is the same bytes either way
 * (parse_n() compares the fast path's line, chunk 0, with yajl's). */
static void test_escaped_text_copied(void **state)
{
    (void) state;
    static const char body[] =
        "{\"flagName\":\"f\",\"message\":\"say \\\"hi\\\"\","
        "\"stack\":\"at a.js:1\\n\\tat b.js:2\\r\\b\\f\\\\x\"}";
    static const char line[] =
        "{\"time\":\"2026-11-22T13:05:09.123Z\",\"project\":\"p\","
        "\"flagName\":\"f\",\"message\":\"say \\\"hi\\\"\","
        "\"stack\":\"at a.js:1\\n\\tat b.js:2\\r\\b\\f\\\\x\"}\n";
    result fast = fast_ok(body);
    size_t n;
    char *got;

    expect_str(fast.r.message, fast.r.message_len, "say \"hi\"");
    expect_str(fast.r.stack, fast.r.stack_len,
               "at a.js:1\n\tat b.js:2\r\b\f\\x");
    /* pointers into the body, at the strings' text; the flag's name, with
     * no escape, is its own */
    assert_ptr_equal(fast.r.flag_name_json, fast.r.flag_name);
    assert_ptr_equal(fast.r.flag_name_json, strstr(body, "f\","));
    assert_int_equal(fast.r.flag_name_json_len, 1);
    assert_ptr_equal(fast.r.message_json, strstr(body, "say"));
    assert_int_equal(fast.r.message_json_len, strlen("say \\\"hi\\\""));
    assert_ptr_equal(fast.r.stack_json, strstr(body, "at a.js"));
    assert_int_equal(fast.r.stack_json_len,
                     strlen("at a.js:1\\n\\tat b.js:2\\r\\b\\f\\\\x"));
    got = line_of(&fast.r, "p", 1795352709123ULL, &n);
    assert_int_equal(n, strlen(line));
    assert_memory_equal(got, line, n);
    free(got);

    /* an escape fl_json_escape() does not write: escaped again */
    fast = fast_ok("{\"flagName\":\"f\",\"message\":\"a\\/b\","
                   "\"stack\":\"\\u0041\\n\"}");
    expect_str(fast.r.message, fast.r.message_len, "a/b");
    expect_str(fast.r.stack, fast.r.stack_len, "A\n");
    assert_null(fast.r.message_json);
    assert_null(fast.r.stack_json);
    got = line_of(&fast.r, "p", 1795352709123ULL, &n);
    assert_non_null(strstr(got, ",\"message\":\"a/b\",\"stack\":\"A\\n\"}"));
    free(got);

    /* a control byte without a short escape: \u001f, not copied */
    fast = fast_ok("{\"flagName\":\"f\",\"message\":\"m\","
                   "\"stack\":\"a\\u001fb\\n\"}");
    assert_null(fast.r.stack_json);

    /* a body with a byte over 0x7f: nothing is copied as written */
    fast = fast_ok("{\"flagName\":\"f\",\"message\":\"caf\xc3\xa9\","
                   "\"stack\":\"a\\nb\"}");
    assert_null(fast.r.flag_name_json);
    assert_null(fast.r.message_json);
    assert_null(fast.r.stack_json);
    expect_str(fast.r.stack, fast.r.stack_len, "a\nb");

    /* the yajl path never sets them */
    result whole = parse_chunked(body, strlen(body), 3);
    assert_int_equal(whole.rc, FL_OK);
    assert_null(whole.r.flag_name_json);
    assert_null(whole.r.message_json);
    assert_null(whole.r.stack_json);
}

/* Trait names and string values as the body wrote them: copied where
 * that is fl_json_escape()'s writing, escaped again where it is not (\/,
 * \u0041) or where the body is not ASCII; the same traits_json from the
 * scanner and from yajl, and a repeated name takes its last value's text. */
static void test_escaped_traits(void **state)
{
    (void) state;
    static const char body[] =
        "{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"a\\\"b\":\"x\\ny\","
        "\"\\u0041\":\"\\/\",\"k\\t\":\"v\\t\",\"n\":1.5e3,"
        "\"a\\\"b\":\"last\\\\\"}}";
    static const char want[] =
        "{\"a\\\"b\":\"last\\\\\",\"A\":\"/\",\"k\\t\":\"v\\t\","
        "\"n\":1.5e3}";
    result fast = fast_ok(body);
    result whole = parse_chunked(body, strlen(body), 3);

    expect_str(fast.r.traits_json, fast.r.traits_json_len, want);
    assert_int_equal(whole.rc, FL_OK);
    expect_str(whole.r.traits_json, whole.r.traits_json_len, want);

    /* a byte over 0x7f: every string escaped from its decoded bytes */
    fast = fast_ok("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"k\\n\":"
                   "\"caf\xc3\xa9 \\\"x\\\"\"}}");
    expect_str(fast.r.traits_json, fast.r.traits_json_len,
               "{\"k\\n\":\"caf\xc3\xa9 \\\"x\\\"\"}");
}

/* What the one-buffer scanner reads itself (no \u0000, pairs only):
 * decoded as yajl decodes it, in every way of feeding the body. */
static void test_scanner_decoding(void **state)
{
    (void) state;
    result res = parse(" {\"flagName\" : \"f\\u002Dx\",\n\"message\":\"0123456789abcdef"
                       "\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\u20AC\\uD83D\\uDE00 "
                       "\xc3\xa9 tail of more than sixteen bytes\", \"unknown\":[1,-0.5e+3,"
                       "true,false,null,{\"a\":[]},{}],\"traits\":{\"n\":-12.5E-1,\"b\":true,"
                       "\"z\":null,\"s\":\"x\"}}\r\n");

    assert_int_equal(res.rc, FL_OK);
    expect_str(res.r.flag_name, res.r.flag_name_len, "f-x");
    expect_str(res.r.message, res.r.message_len,
               "0123456789abcdef\"\\/\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 "
               "\xc3\xa9 tail of more than sixteen bytes");
    expect_str(res.r.traits_json, res.r.traits_json_len,
               "{\"n\":-12.5E-1,\"b\":true,\"z\":null,\"s\":\"x\"}");

    /* what the scanner declines still ends as yajl says */
    expect_json("{\"flagName\":\"a\",\"message\":\"b\"} x",
                "request body is not valid JSON: parse error: trailing garbage (near byte 32)");
    expect_json("{\"flagName\":01}", NULL);
    expect_json("{\"flagName\":tru}", NULL);
    expect_json("{\"flagName\":\"a\tb\"}", NULL);
    expect_json("{\"flagName\":\"\\x\"}", NULL);
    expect_json("[1,]", NULL);
    expect_json("{\"a\":1,}", NULL);
}

static void test_empty_strings_are_valid(void **state)
{
    (void) state;
    result res = parse("{\"flagName\":\"\",\"message\":\"\",\"userId\":\"\",\"traits\":{}}");

    assert_int_equal(res.rc, FL_OK);
    expect_str(res.r.flag_name, res.r.flag_name_len, "");
    expect_str(res.r.message, res.r.message_len, "");
    expect_str(res.r.user_id, res.r.user_id_len, "");
    expect_str(res.r.traits_json, res.r.traits_json_len, "{}");
}

static void test_unknown_fields_ignored(void **state)
{
    (void) state;
    result res = parse("{\"x\":[1,{\"y\":[[],{}]},\"s\",null,true],\"flagName\":\"f\","
                       "\"extra\":{\"flagName\":1,\"traits\":[]},\"message\":\"m\","
                       "\"Stack\":5,\"n\":-0.0e-0}");

    assert_int_equal(res.rc, FL_OK);
    expect_str(res.r.flag_name, res.r.flag_name_len, "f");
    assert_null(res.r.stack);
    assert_null(res.r.traits_json);
}

static void test_duplicate_keys(void **state)
{
    (void) state;
    result res = parse("{\"flagName\":1,\"flagName\":\"a\",\"flagName\":\"b\","
                       "\"message\":\"m\",\"stack\":[],\"stack\":\"s\"}");
    assert_int_equal(res.rc, FL_OK);
    expect_str(res.r.flag_name, res.r.flag_name_len, "b");
    expect_str(res.r.stack, res.r.stack_len, "s");

    /* The last one decides, also when it is wrong or null. */
    expect_field("{\"flagName\":\"a\",\"flagName\":null,\"message\":\"m\"}",
                 "flagName is required");
    expect_field("{\"flagName\":\"a\",\"message\":\"m\",\"flagName\":true}",
                 "flagName must be a string");
    res = parse("{\"flagName\":\"a\",\"message\":\"m\",\"stack\":\"s\",\"stack\":null}");
    assert_int_equal(res.rc, FL_OK);
    assert_null(res.r.stack);

    /* Traits: first position, last value. */
    res = parse("{\"flagName\":\"f\",\"message\":\"m\","
                "\"traits\":{\"a\":\"1\",\"b\":2,\"a\":\"3\",\"c\":[],\"c\":null,\"a\":4}}");
    assert_int_equal(res.rc, FL_OK);
    expect_str(res.r.traits_json, res.r.traits_json_len, "{\"a\":4,\"b\":2,\"c\":null}");

    /* A second traits object replaces the first entirely. */
    res = parse("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"a\":[]},"
                "\"traits\":{\"b\":1}}");
    assert_int_equal(res.rc, FL_OK);
    expect_str(res.r.traits_json, res.r.traits_json_len, "{\"b\":1}");
    res = parse("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"a\":1},"
                "\"traits\":null}");
    assert_int_equal(res.rc, FL_OK);
    assert_null(res.r.traits_json);
    expect_field("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"a\":1},"
                 "\"traits\":5}", "traits must be an object");
}

static void test_traits_serialization(void **state)
{
    (void) state;
    result res = parse("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{"
                       "\"q\\\"k\":\"v\\u0001\\n\\\"\",\"\xc3\xa9\":\"\xe2\x82\xac\","
                       "\"big\":123456789012345678901234567890,\"e\":1E-7,"
                       "\"\":\"\",\"ls\":\"\\u2028\"}}");

    assert_int_equal(res.rc, FL_OK);
    expect_str(res.r.traits_json, res.r.traits_json_len,
               "{\"q\\\"k\":\"v\\u0001\\n\\\"\",\"\xc3\xa9\":\"\xe2\x82\xac\","
               "\"big\":123456789012345678901234567890,\"e\":1E-7,"
               "\"\":\"\",\"ls\":\"\\u2028\"}");
}

static void test_many_traits(void **state)
{
    (void) state;
    /* 20000 traits over 100 names: duplicates are resolved in
     * O(n log n) and the output keeps first positions. */
    size_t cap = 20000 * 24 + 128;
    char *body = malloc(cap);
    assert_non_null(body);
    size_t n = (size_t) sprintf(body, "{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{");
    for (int i = 0; i < 20000; i++) {
        n += (size_t) sprintf(body + n, "%s\"t%d\":%d", i ? "," : "", i % 100, i);
    }
    n += (size_t) sprintf(body + n, "}}");

    result res = parse_chunked(body, n, 4096);
    assert_int_equal(res.rc, FL_OK);

    char want[4096];
    size_t w = 0;
    want[w++] = '{';
    for (int k = 0; k < 100; k++) {
        w += (size_t) sprintf(want + w, "%s\"t%d\":%d", k ? "," : "", k, 19900 + k);
    }
    want[w++] = '}';
    want[w] = '\0';
    expect_str(res.r.traits_json, res.r.traits_json_len, want);
    free(body);
}


/* ----------------------------------------------------------- field errors */

static void test_required_fields(void **state)
{
    (void) state;
    expect_field("{}", "flagName is required");
    expect_field("{\"message\":\"m\"}", "flagName is required");
    expect_field("{\"flagName\":null,\"message\":\"m\"}", "flagName is required");
    expect_field("{\"flagName\":\"f\"}", "message is required");
    expect_field("{\"flagName\":\"f\",\"message\":null}", "message is required");
}

static void test_field_types(void **state)
{
    (void) state;
    static const char *const values[] = {
        "1", "-2.5e3", "true", "false", "[]", "[\"x\"]", "{}", "{\"a\":\"b\"}"
    };
    char body[256];

    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        const char *v = values[i];
        snprintf(body, sizeof(body), "{\"flagName\":%s,\"message\":\"m\"}", v);
        expect_field(body, "flagName must be a string");
        snprintf(body, sizeof(body), "{\"flagName\":\"f\",\"message\":%s}", v);
        expect_field(body, "message must be a string");
        snprintf(body, sizeof(body), "{\"flagName\":\"f\",\"message\":\"m\",\"stack\":%s}", v);
        expect_field(body, "stack must be a string");
        snprintf(body, sizeof(body), "{\"flagName\":\"f\",\"message\":\"m\",\"userId\":%s}", v);
        expect_field(body, "userId must be a string");
        if (v[0] != '{') {
            snprintf(body, sizeof(body),
                     "{\"flagName\":\"f\",\"message\":\"m\",\"traits\":%s}", v);
            expect_field(body, "traits must be an object");
        }
    }
    expect_field("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":\"plan=pro\"}",
                 "traits must be an object");
}

static void test_trait_values(void **state)
{
    (void) state;
    expect_field("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"plan\":[]}}",
                 "traits.plan" TRAITS_MSG);
    expect_field("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"ok\":1,"
                 "\"plan\":{\"x\":1}}}", "traits.plan" TRAITS_MSG);
    expect_field("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"a\":[1],"
                 "\"b\":{}}}", "traits.a" TRAITS_MSG);
    /* The name as decoded; long names are cut at a character boundary. */
    expect_field("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"\\u00e9t\\u00e9\":[]}}",
                 "traits.\xc3\xa9t\xc3\xa9" TRAITS_MSG);
    /* Control bytes and NUL in a name are escaped: the message stays one
     * line and is not cut short by the NUL. */
    expect_field("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"n\\nd\\u0000x\":{}}}",
                 "traits.n\\nd\\u0000x" TRAITS_MSG);
    char body[256], want[256];
    char a63[64];
    memset(a63, 'a', 63);
    a63[63] = '\0';
    snprintf(body, sizeof(body),
             "{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"%s\\u00e9zzz\":[]}}", a63);
    snprintf(want, sizeof(want), "traits.%s..." TRAITS_MSG, a63);
    expect_field(body, want);
    snprintf(body, sizeof(body),
             "{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"%sb\":[]}}", a63);
    snprintf(want, sizeof(want), "traits.%sb" TRAITS_MSG, a63);
    expect_field(body, want);
    /* A bad value later replaced by a good one is fine. */
    result res = parse("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"a\":[],\"a\":\"x\"}}");
    assert_int_equal(res.rc, FL_OK);
    expect_str(res.r.traits_json, res.r.traits_json_len, "{\"a\":\"x\"}");
}

static void test_field_error_order(void **state)
{
    (void) state;
    /* The first field at fault in document order... */
    expect_field("{\"stack\":1,\"flagName\":2,\"message\":\"m\"}", "stack must be a string");
    expect_field("{\"flagName\":2,\"stack\":1,\"message\":\"m\"}", "flagName must be a string");
    expect_field("{\"traits\":{\"a\":[]},\"userId\":5}", "traits.a" TRAITS_MSG);
    expect_field("{\"userId\":5,\"traits\":{\"a\":[]}}", "userId must be a string");
    /* ...before a missing one. */
    expect_field("{\"stack\":1}", "stack must be a string");
    expect_field("{\"message\":\"m\",\"traits\":[]}", "traits must be an object");
    /* A re-sent field moves to its last position. */
    expect_field("{\"userId\":1,\"stack\":2,\"userId\":3}", "stack must be a string");
}


/* ------------------------------------------------------------ JSON errors */

static void test_empty_body(void **state)
{
    (void) state;
    expect_json("", "request body is empty");
    expect_json(" \r\n\t ", "request body is empty");
}

static void test_not_an_object(void **state)
{
    (void) state;
    static const char *const bodies[] = {
        "[]", "[{\"flagName\":\"f\",\"message\":\"m\"}]", "\"x\"", "42", "-1.5",
        "null", "true", "false", " [1, [2, [3]]] "
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        expect_json(bodies[i], "request body must be a JSON object");
    }
}

static void test_syntax_errors(void **state)
{
    (void) state;
    static const char *const bodies[] = {
        "{", "}", "{\"flagName\":\"f\",}", "{\"flagName\" \"f\"}", "{flagName:1}",
        "{\"flagName\":\"f\",\"message\":\"m\"} x", "{\"a\":1}{\"b\":2}",
        "{\"a\":'x'}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":\"\\x\"}",
        "{\"a\":\"tab\there\"}", "{\"a\":\"\\ud800\\udc00\"", "/* c */ {}", "[1,2",
        "\"unterminated", "nul", "{\"a\":tru}", "{\"a\":NaN}",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        result res = parse(bodies[i]);
        if (res.rc != FL_ERR_JSON
            || strncmp(res.err, "request body is not valid JSON: ", 32) != 0)
        {
            fail_msg("body %s: got %d \"%s\"", bodies[i], res.rc, res.err);
        }
    }

    /* The message says what and where. */
    result res = parse_chunked("{\"a\":1 x}", 9, 9);
    assert_int_equal(res.rc, FL_ERR_JSON);
    assert_int_equal(res.feed_rc, FL_ERR_JSON);
    assert_string_equal(res.err, "request body is not valid JSON: lexical error: "
                        "invalid char in json text. (near byte 8)");
    res = parse_chunked("{\"a\":1 x}", 9, 4);      /* counted across pieces */
    assert_string_equal(res.err, "request body is not valid JSON: lexical error: "
                        "invalid char in json text. (near byte 8)");
    res = parse_chunked("{\"a\":1 \"b\"}", 11, 11);
    assert_string_equal(res.err, "request body is not valid JSON: parse error: after key "
                        "and value, inside map, I expect ',' or '}' (near byte 9)");
    res = parse_chunked("{\"a\":1", 6, 6);
    assert_string_equal(res.err,
                        "request body is not valid JSON: parse error: premature EOF (near byte 6)");
}

static void test_syntax_error_after_field_error(void **state)
{
    (void) state;
    /* A field at fault early, broken JSON later: invalid_json wins. */
    expect_json("{\"flagName\":1,\"message\":\"m\"", NULL);
    expect_json("{\"flagName\":1,\"message\":\"m\"} x", NULL);
    expect_json("{\"traits\":{\"a\":[]},\"flagName\":\"f\",,}", NULL);
    expect_json("{\"flagName\":1,\"message\":\"m\",\"x\":\"\xff\"}", NULL);
    char body[256];
    size_t len = (size_t) sprintf(body, "{\"stack\":1,\"x\":");
    for (int i = 0; i < 100; i++) {
        body[len++] = '[';
    }
    body[len] = '\0';
    expect_json(body, "JSON nesting is deeper than 64 levels");
    /* Not an object wins over its content too. */
    expect_json("[{\"flagName\":1}]", "request body must be a JSON object");
}

static void test_depth_limit(void **state)
{
    (void) state;
    /* 10,000 '[': stops at the 65th, whole or byte by byte. */
    size_t n = 10000;
    char *deep = malloc(n);
    assert_non_null(deep);
    memset(deep, '[', n);
    result res = parse_n(deep, n);
    assert_int_equal(res.rc, FL_ERR_JSON);
    assert_string_equal(res.err, "JSON nesting is deeper than 64 levels");
    res = parse_chunked(deep, n, 1);
    assert_int_equal(res.feed_rc, FL_ERR_JSON);   /* at once, from feed() */

    memset(deep, '{', 1);
    for (size_t i = 1; i < n; i++) {
        deep[i] = "{\"a\":"[i % 5];
    }
    res = parse_n(deep, n);
    assert_int_equal(res.rc, FL_ERR_JSON);
    assert_string_equal(res.err, "JSON nesting is deeper than 64 levels");
    free(deep);

    /* Exactly 64 levels is fine: the object and 63 arrays... */
    char body[512];
    size_t len = (size_t) sprintf(body, "{\"flagName\":\"f\",\"message\":\"m\",\"x\":");
    for (int i = 0; i < 63; i++) {
        body[len++] = '[';
    }
    for (int i = 0; i < 63; i++) {
        body[len++] = ']';
    }
    body[len++] = '}';
    body[len] = '\0';
    assert_int_equal(parse(body).rc, FL_OK);

    /* ...65 is not. */
    len = (size_t) sprintf(body, "{\"flagName\":\"f\",\"message\":\"m\",\"x\":");
    for (int i = 0; i < 64; i++) {
        body[len++] = '[';
    }
    for (int i = 0; i < 64; i++) {
        body[len++] = ']';
    }
    body[len++] = '}';
    body[len] = '\0';
    expect_json(body, "JSON nesting is deeper than 64 levels");

    /* Inside traits, an object at depth 3 and deeper is still bounded. */
    len = (size_t) sprintf(body, "{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"t\":");
    for (int i = 0; i < 62; i++) {
        body[len++] = '[';
    }
    for (int i = 0; i < 62; i++) {
        body[len++] = ']';
    }
    body[len++] = '}';
    body[len++] = '}';
    body[len] = '\0';
    expect_field(body, "traits.t" TRAITS_MSG);
}

static void test_invalid_utf8(void **state)
{
    (void) state;
    static const struct {
        const char *body;
        const char *msg;
    } cases[] = {
        { "{\"flagName\":\"\xff\",\"message\":\"m\"}",
          "request body is not valid UTF-8 (byte 13)" },
        { "{\"flagName\":\"f\",\"message\":\"\xe2\x82\"}",       /* cut sequence */
          "request body is not valid UTF-8 (byte 27)" },
        { "{\"flagName\":\"f\",\"message\":\"m\",\"\xc3\":1}",   /* in a key */
          "request body is not valid UTF-8 (byte 31)" },
        { "{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"a\":\"\x80\"}}",
          "request body is not valid UTF-8 (byte 45)" },
        { "{\"flagName\":\"f\",\"message\":\"m\",\"x\":\"\xf8\x88\x80\x80\x80\"}",
          "request body is not valid UTF-8 (byte 35)" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        expect_json(cases[i].body, cases[i].msg);
    }
    /* Invalid bytes outside strings: the earlier of the two errors wins,
     * here the bad byte, which yajl never sees. */
    expect_json("{\"flagName\":\"f\",\"message\":\"m\"}\xff",
                "request body is not valid UTF-8 (byte 30)");
}

#define PRE "{\"flagName\":\"f\",\"message\":\""     /* 27 bytes */

/* docs/http-api.md: what yajl lets through must be refused too, whole, byte by byte and
 * in 7-byte pieces (parse() does all three and wants the same message). */
static void test_strict_utf8(void **state)
{
    (void) state;
    static const struct {
        const char *body;
        const char *msg;
    } cases[] = {
        /* overlong forms */
        { PRE "\xc0\x80\"}", "request body is not valid UTF-8 (byte 27)" },
        { PRE "x\xc1\xbf\"}", "request body is not valid UTF-8 (byte 28)" },
        { PRE "\xe0\x80\x80\"}", "request body is not valid UTF-8 (byte 27)" },
        { PRE "\xe0\x9f\xbf\"}", "request body is not valid UTF-8 (byte 27)" },
        { PRE "\xf0\x8f\xbf\xbf\"}", "request body is not valid UTF-8 (byte 27)" },
        /* raw surrogates */
        { PRE "\xed\xa0\x80\"}", "request body is not valid UTF-8 (byte 27)" },
        { PRE "ab\xed\xbf\xbf\"}", "request body is not valid UTF-8 (byte 29)" },
        /* above U+10FFFF */
        { PRE "\xf4\x90\x80\x80\"}", "request body is not valid UTF-8 (byte 27)" },
        { PRE "\xf5\x80\x80\x80\"}", "request body is not valid UTF-8 (byte 27)" },
        { PRE "\xfe\"}", "request body is not valid UTF-8 (byte 27)" },
        /* stray continuation, cut sequence */
        { PRE "\x80\"}", "request body is not valid UTF-8 (byte 27)" },
        { PRE "\xf0\x9f\x98\"}", "request body is not valid UTF-8 (byte 27)" },
        /* lone surrogate escapes */
        { PRE "\\ud800\"}", "request body has a lone surrogate escape \\ud800 (byte 27)" },
        { PRE "\\udc00\"}", "request body has a lone surrogate escape \\udc00 (byte 27)" },
        { PRE "ab\\uDBFFx\"}", "request body has a lone surrogate escape \\udbff (byte 29)" },
        { PRE "\\ud800\\u0041\"}", "request body has a lone surrogate escape \\ud800 (byte 27)" },
        { PRE "\\ud800\\ud800\\udc00\"}", "request body has a lone surrogate escape \\ud800 (byte 27)" },
        { PRE "\\ud800\\n\"}", "request body has a lone surrogate escape \\ud800 (byte 27)" },
        { PRE "\\ud83d\\ude00\\ude00\"}", "request body has a lone surrogate escape \\ude00 (byte 39)" },
        { "{\"\\udfff\":1}", "request body has a lone surrogate escape \\udfff (byte 2)" },
        { "{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"a\":\"\\ud800\"}}",
          "request body has a lone surrogate escape \\ud800 (byte 45)" },
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        expect_json(cases[i].body, cases[i].msg);
    }

    /* A syntax error before the bad bytes is reported first. */
    result res = parse("{\"a\" x \"\xc0\x80\"}");
    assert_int_equal(res.rc, FL_ERR_JSON);
    assert_non_null(strstr(res.err, "not valid JSON"));
    res = parse("{\"a\":\"\\uzzzz\\ud800\"}");      /* bad hex: yajl's */
    assert_int_equal(res.rc, FL_ERR_JSON);
    assert_non_null(strstr(res.err, "not valid JSON"));
}

static void test_valid_utf8_kept(void **state)
{
    (void) state;
    static const struct {
        const char *in;         /* the message as written in the body */
        const char *out;        /* decoded */
    } cases[] = {
        { "\\ud83d\\ude00", "\xf0\x9f\x98\x80" },
        { "\\uD83D\\uDE00x", "\xf0\x9f\x98\x80x" },
        { "\\udbff\\udfff", "\xf4\x8f\xbf\xbf" },
        { "\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf", "\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf" },
        { "\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf", "\xed\x9f\xbf\xee\x80\x80\xef\xbf\xbf" },
        { "\xc2\x80\xdf\xbf\xe0\xa0\x80\xf0\x90\x80\x80", "\xc2\x80\xdf\xbf\xe0\xa0\x80\xf0\x90\x80\x80" },
        { "\\\\ud800", "\\ud800" },                /* an escaped backslash */
        { "\\\"\\ud7ff\\ue000", "\"\xed\x9f\xbf\xee\x80\x80" },
    };
    char body[256];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(body, sizeof(body), PRE "%s\"}", cases[i].in);
        result res = parse(body);
        if (res.rc != FL_OK) {
            fail_msg("case %zu: got %d \"%s\"", i, res.rc, res.err);
        }
        expect_str(res.r.message, res.r.message_len, cases[i].out);
    }
}

#undef PRE

static void test_errors_are_sticky(void **state)
{
    (void) state;
    fl_report_parser_t *p = fl_report_parser_new(&arena);
    assert_non_null(p);
    assert_int_equal(fl_report_parser_feed(p, (const unsigned char *) "{]", 2), FL_ERR_JSON);
    assert_int_equal(fl_report_parser_feed(p, (const unsigned char *) "}", 1), FL_ERR_JSON);
    fl_report_t r;
    char err[128];
    assert_int_equal(fl_report_parser_finish(p, &r, err, sizeof(err)), FL_ERR_JSON);
    assert_non_null(strstr(err, "not valid JSON"));

    /* A small error buffer gets a truncated, terminated message. */
    p = fl_report_parser_new(&arena);
    fl_report_parser_feed(p, (const unsigned char *) "{}", 2);
    char tiny[9];
    assert_int_equal(fl_report_parser_finish(p, &r, tiny, sizeof(tiny)), FL_ERR_FIELD);
    assert_string_equal(tiny, "flagName");
    /* A cut never leaves half a UTF-8 sequence behind. */
    p = fl_report_parser_new(&arena);
    const char *b = "{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"\xc3\xa9t\xc3\xa9\":[]}}";
    fl_report_parser_feed(p, (const unsigned char *) b, strlen(b));
    assert_int_equal(fl_report_parser_finish(p, &r, tiny, sizeof(tiny)), FL_ERR_FIELD);
    assert_string_equal(tiny, "traits.");
    p = fl_report_parser_new(&arena);
    fl_report_parser_feed(p, (const unsigned char *) b, strlen(b));
    char ten[10];
    assert_int_equal(fl_report_parser_finish(p, &r, ten, sizeof(ten)), FL_ERR_FIELD);
    assert_string_equal(ten, "traits.\xc3\xa9");
    /* No buffer at all is allowed. */
    p = fl_report_parser_new(&arena);
    assert_int_equal(fl_report_parser_finish(p, &r, NULL, 0), FL_ERR_JSON);
}

static void test_allocation_failure(void **state)
{
    (void) state;
    arena_allocs_left = 0;
    assert_null(fl_report_parser_new(&arena));
    arena_allocs_left = SIZE_MAX;
}


/* ------------------------------------------- "enabled": the report's cohort */

static void log_line_is(const fl_report_t *r, const char *project, uint64_t now_ms,
    const char *want);

/* body parses, with "enabled" absent (has 0) or the value given */
static void expect_enabled(const char *body, int has, int value)
{
    result res = parse(body);
    assert_int_equal(res.rc, FL_OK);
    assert_int_equal(res.r.has_enabled, has);
    assert_int_equal(res.r.enabled, has ? value : 0);
}

static void test_enabled_member(void **state)
{
    (void) state;
    expect_enabled("{\"flagName\":\"f\",\"message\":\"m\",\"enabled\":true}", 1, 1);
    expect_enabled(" {\"enabled\" : false , \"flagName\":\"f\",\"message\":\"m\"}",
                   1, 0);

    /* null is absent, as for every optional member */
    expect_enabled("{\"flagName\":\"f\",\"message\":\"m\",\"enabled\":null}", 0, 0);
    expect_enabled("{\"flagName\":\"f\",\"message\":\"m\"}", 0, 0);

    /* the last one wins, null included; "Enabled" is another member */
    expect_enabled("{\"flagName\":\"f\",\"message\":\"m\",\"enabled\":1,"
                   "\"enabled\":true,\"enabled\":false,\"Enabled\":7}", 1, 0);
    expect_enabled("{\"flagName\":\"f\",\"message\":\"m\",\"enabled\":true,"
                   "\"enabled\":null}", 0, 0);

    /* a member inside traits or elsewhere is not the report's */
    expect_enabled("{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"enabled\":true},"
                   "\"x\":{\"enabled\":false}}", 0, 0);
}

static void test_enabled_wrong_type(void **state)
{
    (void) state;
    static const char *const values[] = {
        "1", "0", "-2.5e3", "\"true\"", "\"\"", "[]", "[true]", "{}",
        "{\"a\":true}"
    };
    char body[256];

    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        snprintf(body, sizeof(body),
                 "{\"flagName\":\"f\",\"message\":\"m\",\"enabled\":%s}",
                 values[i]);
        expect_field(body, "enabled must be a boolean");
    }
    /* in document order with the other fields, before a missing one */
    expect_field("{\"enabled\":1,\"stack\":2}", "enabled must be a boolean");
    expect_field("{\"stack\":2,\"enabled\":1}", "stack must be a string");
    expect_field("{\"enabled\":\"yes\"}", "enabled must be a boolean");
    expect_field("{\"enabled\":true}", "flagName is required");
    /* a JSON error still comes first */
    expect_json("{\"enabled\":1,}", NULL);
}

static void test_log_line_enabled(void **state)
{
    (void) state;
    result res = parse("{\"enabled\":true,\"flagName\":\"f\",\"message\":\"m\","
                       "\"userId\":\"u\",\"traits\":{\"a\":1}}");
    assert_int_equal(res.rc, FL_OK);
    log_line_is(&res.r, "shop", 1795352709123ULL,
        "{\"time\":\"2026-11-22T13:05:09.123Z\",\"project\":\"shop\","
        "\"flagName\":\"f\",\"message\":\"m\",\"userId\":\"u\","
        "\"traits\":{\"a\":1},\"enabled\":true}\n");

    res = parse("{\"flagName\":\"f\",\"message\":\"m\",\"enabled\":false}");
    assert_int_equal(res.rc, FL_OK);
    log_line_is(&res.r, "shop", 1795352709123ULL,
        "{\"time\":\"2026-11-22T13:05:09.123Z\",\"project\":\"shop\","
        "\"flagName\":\"f\",\"message\":\"m\",\"enabled\":false}\n");

    res = parse("{\"flagName\":\"f\",\"message\":\"m\",\"enabled\":null}");
    assert_int_equal(res.rc, FL_OK);
    log_line_is(&res.r, "shop", 1795352709123ULL,
        "{\"time\":\"2026-11-22T13:05:09.123Z\",\"project\":\"shop\","
        "\"flagName\":\"f\",\"message\":\"m\"}\n");
}


/* A body of ASCII only through the fast path: the strings it holds
 * without escapes are kept in place and copied into the line as they
 * are (their *_json is the string itself); the others are escaped again
 * unless their escapes are fl_json_escape()'s (test_escaped_text_copied),
 * and so is every string of a body with a byte >= 0x80. */
static void test_log_line_verbatim(void **state)
{
    (void) state;
    const char *body =
        "{\"flagName\":\"f-1\",\"message\":\"it's <b>'x'</b> / 100%\","
        "\"stack\":\"at a\\n  at b\",\"userId\":\"u\\u0041\","
        "\"traits\":{\"plan\":\"pro\",\"e\\\"q\":\"x\\/y\",\"n\":-1.5e3}}";
    size_t len = strlen(body);
    result fast = parse_chunked(body, len, 0);

    assert_int_equal(fast.rc, FL_OK);
    /* the flag and message without escapes: their own JSON, the same
     * pointers; the stack's \n is fl_json_escape()'s: its text in the
     * body; the userId's \u0041 is not: escaped again */
    assert_ptr_equal(fast.r.flag_name_json, fast.r.flag_name);
    assert_int_equal(fast.r.flag_name_json_len, 3);
    assert_ptr_equal(fast.r.message_json, fast.r.message);
    assert_int_equal(fast.r.message_json_len, fast.r.message_len);
    assert_ptr_equal(fast.r.stack_json, strstr(body, "at a\\n"));
    assert_int_equal(fast.r.stack_json_len, strlen("at a\\n  at b"));
    assert_null(fast.r.user_id_json);
    /* in place: inside the body; decoded: elsewhere */
    assert_true(fast.r.message > body && fast.r.message < body + len);
    assert_true(fast.r.stack < body || fast.r.stack >= body + len);
    expect_str(fast.r.user_id, fast.r.user_id_len, "uA");
    expect_str(fast.r.traits_json, fast.r.traits_json_len,
               "{\"plan\":\"pro\",\"e\\\"q\":\"x/y\",\"n\":-1.5e3}");
    log_line_is(&fast.r, "shop", 1795352709123ULL,
        "{\"time\":\"2026-11-22T13:05:09.123Z\",\"project\":\"shop\","
        "\"flagName\":\"f-1\",\"message\":\"it's <b>'x'</b> / 100%\","
        "\"stack\":\"at a\\n  at b\",\"userId\":\"uA\","
        "\"traits\":{\"plan\":\"pro\",\"e\\\"q\":\"x/y\",\"n\":-1.5e3}}\n");

    /* a duplicate trait takes the last value and whether it is verbatim:
     * escaped after plain, plain after escaped */
    const char *dup = "{\"flagName\":\"f\",\"message\":\"m\",\"traits\":"
                      "{\"b\":1,\"a\":\"x\\\\y\",\"b\":\"q\\\"r\",\"a\":\"z\"}}";
    fast = parse_chunked(dup, strlen(dup), 0);
    assert_int_equal(fast.rc, FL_OK);
    expect_str(fast.r.traits_json, fast.r.traits_json_len,
               "{\"b\":\"q\\\"r\",\"a\":\"z\"}");
    (void) parse(dup);

    /* every string plain: all four in place */
    const char *plain = "{\"flagName\":\"f\",\"message\":\"\",\"stack\":\"s\","
                        "\"userId\":\"u\"}";
    fast = parse_chunked(plain, strlen(plain), 0);
    assert_int_equal(fast.rc, FL_OK);
    assert_ptr_equal(fast.r.flag_name_json, fast.r.flag_name);
    assert_ptr_equal(fast.r.message_json, fast.r.message);
    assert_int_equal(fast.r.message_json_len, 0);
    assert_ptr_equal(fast.r.stack_json, fast.r.stack);
    assert_int_equal(fast.r.stack_json_len, 1);
    assert_ptr_equal(fast.r.user_id_json, fast.r.user_id);
    assert_int_equal(fast.r.user_id_json_len, 1);
    log_line_is(&fast.r, "shop", 1795352709123ULL,
        "{\"time\":\"2026-11-22T13:05:09.123Z\",\"project\":\"shop\","
        "\"flagName\":\"f\",\"message\":\"\",\"stack\":\"s\",\"userId\":\"u\"}\n");

    /* one byte >= 0x80 anywhere: nothing is verbatim, and U+2028, valid
     * in JSON, is still escaped for JavaScript readers */
    const char *wide =
        "{\"flagName\":\"f\",\"message\":\"a\xe2\x80\xa8" "b\","
        "\"userId\":\"caf\xc3\xa9\",\"traits\":{\"k\":\"\xe2\x80\xa9\"}}";
    fast = parse_chunked(wide, strlen(wide), 0);
    assert_int_equal(fast.rc, FL_OK);
    assert_null(fast.r.flag_name_json);
    assert_null(fast.r.message_json);
    assert_null(fast.r.user_id_json);
    expect_str(fast.r.traits_json, fast.r.traits_json_len, "{\"k\":\"\\u2029\"}");
    log_line_is(&fast.r, "shop", 1795352709123ULL,
        "{\"time\":\"2026-11-22T13:05:09.123Z\",\"project\":\"shop\","
        "\"flagName\":\"f\",\"message\":\"a\\u2028b\",\"userId\":\"caf\xc3\xa9\","
        "\"traits\":{\"k\":\"\\u2029\"}}\n");

    /* an ASCII body the scanner declines (an unpaired surrogate escape)
     * is yajl's to refuse, with the strict check's message */
    expect_json("{\"flagName\":\"f\",\"message\":\"\\ud800\"}", NULL);
    const char *lone = "{\"flagName\":\"f\",\"message\":\"\\udc00\"}";
    fast = parse_chunked(lone, strlen(lone), 0);
    assert_int_equal(fast.rc, FL_ERR_JSON);
    assert_string_equal(fast.err,
                        "request body has a lone surrogate escape \\udc00 (byte 27)");
}


/* ------------------------------------------ the reporter as a caller */

static void trait_is(const fl_user_t *u, size_t i, const char *name,
    const char *value)
{
    assert_true(i < u->ntraits);
    expect_str(u->traits[i].name, u->traits[i].name_len, name);
    assert_int_equal(u->traits[i].value_len, strlen(value));
    assert_memory_equal(u->traits[i].value, value, strlen(value));
}

/* Two users are the same caller: id and traits, byte for byte. */
static void same_user(const fl_user_t *a, const fl_user_t *b)
{
    assert_int_equal(a->user_id == NULL, b->user_id == NULL);
    assert_int_equal(a->user_id_len, b->user_id_len);
    if (a->user_id_len != 0) {
        assert_memory_equal(a->user_id, b->user_id, a->user_id_len);
    }
    assert_int_equal(a->ntraits, b->ntraits);
    for (size_t i = 0; i < a->ntraits; i++) {
        same_str(a->traits[i].name, a->traits[i].name_len,
                 b->traits[i].name, b->traits[i].name_len);
        same_str(a->traits[i].value, a->traits[i].value_len,
                 b->traits[i].value, b->traits[i].value_len);
    }
}

/* The report's caller from the traits as the parser read them; the same
 * caller, error and message from traits_json read again (r.traits NULL),
 * as the core reads a report it did not parse. */
static fl_status_t report_user(const char *body, size_t max_traits,
    fl_user_t *u, char *err)
{
    result res = parse(body);
    assert_int_equal(res.rc, FL_OK);
    assert_int_equal(res.r.traits == NULL, res.r.traits_json == NULL);

    fl_status_t rc = fl_report_user(&res.r, max_traits, &arena, u, err, 256);

    fl_report_t text = res.r;
    fl_user_t again;
    char err2[256];
    text.traits = NULL;
    assert_int_equal(fl_report_user(&text, max_traits, &arena, &again, err2,
                                    256), rc);
    if (rc == FL_OK) {
        same_user(u, &again);
    } else {
        assert_string_equal(err, err2);
    }
    return rc;
}

static void test_report_user(void **state)
{
    (void) state;
    fl_user_t u;
    char err[256];

    /* sorted by name; numbers as their text, booleans as words, null and
     * duplicates as the SDK's body has them */
    assert_int_equal(report_user(
        "{\"flagName\":\"f\",\"message\":\"m\",\"userId\":\"u-1\","
        "\"traits\":{\"plan\":\"pro\",\"n\":-1.50e2,\"b\":true,\"f\":false,"
        "\"z\":null,\"e\":\"\",\"plan\":\"team\",\"\u00e9\":\"\u20ac\"}}",
        64, &u, err), FL_OK);
    expect_str(u.user_id, u.user_id_len, "u-1");
    assert_int_equal(u.ntraits, 6);
    trait_is(&u, 0, "b", "true");
    trait_is(&u, 1, "e", "");
    trait_is(&u, 2, "f", "false");
    trait_is(&u, 3, "n", "-1.50e2");
    trait_is(&u, 4, "plan", "team");
    trait_is(&u, 5, "\xc3\xa9", "\xe2\x82\xac");
    assert_non_null(fl_user_trait(&u, "plan", 4));
    assert_null(fl_user_trait(&u, "z", 1));

    /* neither, an empty userId, empty or null traits: no one */
    assert_int_equal(report_user("{\"flagName\":\"f\",\"message\":\"m\","
                                 "\"userId\":\"\",\"traits\":{\"a\":null}}",
                                 64, &u, err), FL_OK);
    assert_null(u.user_id);
    assert_int_equal(u.ntraits, 0);
    assert_int_equal(report_user("{\"flagName\":\"f\",\"message\":\"m\"}",
                                 64, &u, err), FL_OK);
    assert_null(u.user_id);
    assert_int_equal(u.ntraits, 0);

    /* the limits of a query string */
    assert_int_equal(report_user("{\"flagName\":\"f\",\"message\":\"m\","
                                 "\"traits\":{\"a\":1,\"b\":2,\"c\":null}}",
                                 2, &u, err), FL_OK);
    assert_int_equal(u.ntraits, 2);
    assert_int_equal(report_user("{\"flagName\":\"f\",\"message\":\"m\","
                                 "\"traits\":{\"a\":1,\"b\":2,\"c\":3}}",
                                 2, &u, err), FL_ERR_FIELD);
    assert_string_equal(err, "more than 2 traits");
    assert_int_equal(report_user("{\"flagName\":\"f\",\"message\":\"m\","
                                 "\"traits\":{\"\":1}}", 64, &u, err), FL_ERR_FIELD);
    assert_string_equal(err, "a trait name is empty");
    assert_int_equal(report_user("{\"flagName\":\"f\",\"message\":\"m\","
                                 "\"traits\":{\"a\":\"x\\u0000y\"}}", 64, &u, err),
                     FL_ERR_FIELD);
    assert_string_equal(err, "traits.a holds a NUL byte");
    assert_int_equal(report_user("{\"flagName\":\"f\",\"message\":\"m\","
                                 "\"userId\":\"a\\u0000\"}", 64, &u, err),
                     FL_ERR_FIELD);
    assert_string_equal(err, "userId holds a NUL byte");

    char body[1400], name[200];
    memset(name, 'n', 129);
    name[129] = '\0';
    snprintf(body, sizeof(body),
             "{\"flagName\":\"f\",\"message\":\"m\",\"traits\":{\"%s\":1}}", name);
    assert_int_equal(report_user(body, 64, &u, err), FL_ERR_FIELD);
    assert_string_equal(err, "a trait name is longer than 128 bytes");
    char value[1100];
    memset(value, 'v', 1025);
    value[1025] = '\0';
    snprintf(body, sizeof(body),
             "{\"flagName\":\"f\",\"message\":\"m\",\"userId\":\"%s\"}", value);
    assert_int_equal(report_user(body, 64, &u, err), FL_ERR_FIELD);
    assert_string_equal(err, "userId is longer than 1024 bytes");
    value[1024] = '\0';
    snprintf(body, sizeof(body),
             "{\"flagName\":\"f\",\"message\":\"m\",\"userId\":\"%s\"}", value);
    assert_int_equal(report_user(body, 64, &u, err), FL_OK);
    assert_int_equal(u.user_id_len, 1024);
}

static fl_cohort_t cohort(const char *body, size_t max_traits, fl_user_t *u)
{
    result res = parse(body);
    assert_int_equal(res.rc, FL_OK);
    return fl_report_cohort(&res.r, max_traits, &arena, u);
}

#define REPORT "{\"flagName\":\"f\",\"message\":\"m\""

static void test_report_cohort(void **state)
{
    (void) state;
    fl_user_t u;

    /* "enabled" says it outright, whoever reports */
    assert_int_equal(cohort(REPORT ",\"enabled\":true,\"userId\":\"u\"}", 64, &u),
                     FL_COHORT_ON);
    /* with its user, so that the claim can be checked */
    expect_str(u.user_id, u.user_id_len, "u");
    assert_int_equal(cohort(REPORT ",\"enabled\":false,\"userId\":\"u\"}", 64, &u),
                     FL_COHORT_OFF);
    assert_int_equal(cohort(REPORT ",\"enabled\":false}", 64, &u), FL_COHORT_OFF);

    /* neither: on, as before cohorts */
    assert_int_equal(cohort(REPORT "}", 64, &u), FL_COHORT_ON);
    assert_int_equal(cohort(REPORT ",\"enabled\":null}", 64, &u), FL_COHORT_ON);
    assert_int_equal(cohort(REPORT ",\"userId\":\"\",\"traits\":{}}", 64, &u),
                     FL_COHORT_ON);
    assert_int_equal(cohort(REPORT ",\"traits\":{\"a\":null}}", 64, &u),
                     FL_COHORT_ON);

    /* a userId or traits: the flag's answer for them */
    assert_int_equal(cohort(REPORT ",\"userId\":\"u\"}", 64, &u), FL_COHORT_EVALUATE);
    expect_str(u.user_id, u.user_id_len, "u");
    assert_int_equal(u.ntraits, 0);
    assert_int_equal(cohort(REPORT ",\"traits\":{\"plan\":\"pro\"}}", 64, &u),
                     FL_COHORT_EVALUATE);
    assert_null(u.user_id);
    trait_is(&u, 0, "plan", "pro");

    /* a part over the limits is left out, as if not sent */
    assert_int_equal(cohort(REPORT ",\"userId\":\"u\",\"traits\":{\"a\":1,\"b\":2}}",
                            1, &u), FL_COHORT_EVALUATE);
    expect_str(u.user_id, u.user_id_len, "u");
    assert_int_equal(u.ntraits, 0);
    assert_int_equal(cohort(REPORT ",\"traits\":{\"a\":1,\"b\":2}}", 1, &u),
                     FL_COHORT_ON);
    assert_int_equal(u.ntraits, 0);
    assert_int_equal(cohort(REPORT ",\"userId\":\"a\\u0000\",\"traits\":{\"a\":1}}",
                            64, &u), FL_COHORT_EVALUATE);
    assert_null(u.user_id);
    trait_is(&u, 0, "a", "1");
    assert_int_equal(cohort(REPORT ",\"userId\":\"a\\u0000\",\"traits\":{\"\":1}}",
                            64, &u), FL_COHORT_ON);
}

/* The answer flag i of p gives the caller of a report that names one,
 * at effective_milli. */
static int reporter_enabled(const fl_project_t *p, size_t i,
    uint32_t effective_milli, const char *body)
{
    fl_detail_t d;
    fl_user_t u;

    assert_int_equal(cohort(body, 64, &u), FL_COHORT_EVALUATE);
    assert_int_equal(fl_evaluate_flag_detail(p, i, &u, effective_milli,
                                             FL_SWITCH_NONE, &d), 0);
    return d.enabled;
}

/* The caller evaluates as GET /flags's would: a segment on a trait, a
 * percentage on the userId. */
static void test_report_cohort_evaluates(void **state)
{
    (void) state;
    static const char file[] =
        "{\"flags\":["
        "{\"name\":\"pro-only\",\"enabled\":true,\"rolloutPercentage\":100,"
        " \"segments\":[\"pro\"]},"
        "{\"name\":\"new-checkout\",\"enabled\":true,\"rolloutPercentage\":25}],"
        "\"segments\":{\"pro\":{\"rules\":[{\"trait\":\"plan\",\"op\":\"eq\","
        "\"value\":\"pro\"}]}}}";
    fl_project_t *p = NULL;
    char err[256];

    assert_int_equal(fl_project_load_buffer(file, sizeof(file) - 1, "test", &p,
                                            err, sizeof(err)), FL_OK);

    assert_int_equal(reporter_enabled(p, 0, 100000,
                                      REPORT ",\"traits\":{\"plan\":\"pro\"}}"), 1);
    assert_int_equal(reporter_enabled(p, 0, 100000,
                                      REPORT ",\"traits\":{\"plan\":\"free\"}}"), 0);

    /* bucket("new-checkout", "user-1") is 40631, "user-2" 10789
     * (docs/evaluation.md): off and on at 25 % */
    assert_int_equal(reporter_enabled(p, 1, 25000,
                                      REPORT ",\"userId\":\"user-1\"}"), 0);
    assert_int_equal(reporter_enabled(p, 1, 25000,
                                      REPORT ",\"userId\":\"user-2\"}"), 1);

    fl_project_free(p);
}

#undef REPORT


/* ------------------------------------------------------------- log line */

static void log_line_is(const fl_report_t *r, const char *project, uint64_t now_ms,
    const char *want)
{
    size_t n;
    char *buf = line_of(r, project, now_ms, &n);
    if (n != strlen(want) || memcmp(buf, want, n) != 0) {
        fail_msg("log line\n got: %.*s\nwant: %s", (int) n, buf, want);
    }
    free(buf);
}

static void test_log_line_minimal(void **state)
{
    (void) state;
    result res = parse("{\"flagName\":\"new-checkout\",\"message\":\"boom\"}");
    assert_int_equal(res.rc, FL_OK);
    log_line_is(&res.r, "shop", 1795352709123ULL,
        "{\"time\":\"2026-11-22T13:05:09.123Z\",\"project\":\"shop\","
        "\"flagName\":\"new-checkout\",\"message\":\"boom\"}\n");
}

static void test_log_line_full(void **state)
{
    (void) state;
    result res = parse(
        "{\"traits\":{\"plan\":\"pro\",\"n\":1.50,\"beta\":true},\"userId\":\"u\\\"1\","
        "\"stack\":\"Error: x\\n    at f (a.js:1:2)\\r\\n\\tat g\","
        "\"message\":\"quote \\\" backslash \\\\ ctl \\u0001\\u001f del \\u007f "
        "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 \\u2028\",\"flagName\":\"x\"}");
    assert_int_equal(res.rc, FL_OK);
    log_line_is(&res.r, "shop", 1795352709123ULL,
        "{\"time\":\"2026-11-22T13:05:09.123Z\",\"project\":\"shop\",\"flagName\":\"x\","
        "\"message\":\"quote \\\" backslash \\\\ ctl \\u0001\\u001f del \x7f "
        "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 \\u2028\","
        "\"stack\":\"Error: x\\n    at f (a.js:1:2)\\r\\n\\tat g\",\"userId\":\"u\\\"1\","
        "\"traits\":{\"plan\":\"pro\",\"n\":1.50,\"beta\":true}}\n");
}

static void test_log_line_epoch_and_nul(void **state)
{
    (void) state;
    fl_report_t r;
    memset(&r, 0, sizeof(r));
    r.flag_name = "f";
    r.flag_name_len = 1;
    r.message = "a\0b";
    r.message_len = 3;
    r.user_id = "";
    r.user_id_len = 0;
    log_line_is(&r, "p\"q", 0,
        "{\"time\":\"1970-01-01T00:00:00.000Z\",\"project\":\"p\\\"q\","
        "\"flagName\":\"f\",\"message\":\"a\\u0000b\",\"userId\":\"\"}\n");
}

static void test_log_bound_worst_case(void **state)
{
    (void) state;
    /* Every byte a control character: 6 bytes each once escaped. */
    char ctl[256];
    for (size_t i = 0; i < sizeof(ctl); i++) {
        ctl[i] = (char) (i % 32);
    }
    fl_report_t r;
    memset(&r, 0, sizeof(r));
    r.flag_name = ctl;
    r.flag_name_len = sizeof(ctl);
    r.message = ctl;
    r.message_len = sizeof(ctl);
    r.stack = ctl;
    r.stack_len = sizeof(ctl);
    r.user_id = ctl;
    r.user_id_len = sizeof(ctl);
    r.traits_json = "{\"a\":1}";
    r.traits_json_len = 7;

    size_t bound = fl_report_log_bound(&r, sizeof(ctl));
    char *buf = malloc(bound);
    assert_non_null(buf);
    size_t n = fl_report_log_line(&r, ctl, sizeof(ctl), UINT64_C(253402300799999), buf);
    assert_true(n <= bound);
    assert_int_equal(buf[n - 1], '\n');
    assert_null(memchr(buf, '\n', n - 1));       /* one line: '\n' escaped */
    free(buf);
}

/* fl_utf8_prefix: the one UTF-8 cut for names quoted in messages. */
static void test_utf8_prefix(void **state)
{
    (void) state;
    const char *s = "ab\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";    /* ab é € 😀 */
    size_t len = strlen(s);

    assert_int_equal(fl_utf8_prefix(s, len, 100), len);
    assert_int_equal(fl_utf8_prefix(s, len, len), len);
    assert_int_equal(fl_utf8_prefix(s, len, 2), 2);
    assert_int_equal(fl_utf8_prefix(s, len, 3), 2);         /* in é */
    assert_int_equal(fl_utf8_prefix(s, len, 4), 4);
    assert_int_equal(fl_utf8_prefix(s, len, 5), 4);         /* in € */
    assert_int_equal(fl_utf8_prefix(s, len, 6), 4);
    assert_int_equal(fl_utf8_prefix(s, len, 7), 7);
    assert_int_equal(fl_utf8_prefix(s, len, 8), 7);         /* in 😀 */
    assert_int_equal(fl_utf8_prefix(s, len, 10), 7);
    assert_int_equal(fl_utf8_prefix(s, len, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_full_report, arena_teardown),
        cmocka_unit_test_teardown(test_minimal_report, arena_teardown),
        cmocka_unit_test_teardown(test_null_optional_is_absent, arena_teardown),
        cmocka_unit_test_teardown(test_decoded_strings, arena_teardown),
        cmocka_unit_test_teardown(test_scanner_decoding, arena_teardown),
        cmocka_unit_test_teardown(test_escaped_text_copied, arena_teardown),
        cmocka_unit_test_teardown(test_escaped_traits, arena_teardown),
        cmocka_unit_test_teardown(test_empty_strings_are_valid, arena_teardown),
        cmocka_unit_test_teardown(test_unknown_fields_ignored, arena_teardown),
        cmocka_unit_test_teardown(test_duplicate_keys, arena_teardown),
        cmocka_unit_test_teardown(test_traits_serialization, arena_teardown),
        cmocka_unit_test_teardown(test_many_traits, arena_teardown),
        cmocka_unit_test_teardown(test_required_fields, arena_teardown),
        cmocka_unit_test_teardown(test_field_types, arena_teardown),
        cmocka_unit_test_teardown(test_trait_values, arena_teardown),
        cmocka_unit_test_teardown(test_field_error_order, arena_teardown),
        cmocka_unit_test_teardown(test_empty_body, arena_teardown),
        cmocka_unit_test_teardown(test_not_an_object, arena_teardown),
        cmocka_unit_test_teardown(test_syntax_errors, arena_teardown),
        cmocka_unit_test_teardown(test_syntax_error_after_field_error, arena_teardown),
        cmocka_unit_test_teardown(test_depth_limit, arena_teardown),
        cmocka_unit_test_teardown(test_invalid_utf8, arena_teardown),
        cmocka_unit_test_teardown(test_strict_utf8, arena_teardown),
        cmocka_unit_test_teardown(test_valid_utf8_kept, arena_teardown),
        cmocka_unit_test_teardown(test_errors_are_sticky, arena_teardown),
        cmocka_unit_test_teardown(test_allocation_failure, arena_teardown),
        cmocka_unit_test_teardown(test_enabled_member, arena_teardown),
        cmocka_unit_test_teardown(test_enabled_wrong_type, arena_teardown),
        cmocka_unit_test_teardown(test_log_line_enabled, arena_teardown),
        cmocka_unit_test_teardown(test_log_line_verbatim, arena_teardown),
        cmocka_unit_test_teardown(test_report_user, arena_teardown),
        cmocka_unit_test_teardown(test_report_cohort, arena_teardown),
        cmocka_unit_test_teardown(test_report_cohort_evaluates, arena_teardown),
        cmocka_unit_test_teardown(test_log_line_minimal, arena_teardown),
        cmocka_unit_test_teardown(test_log_line_full, arena_teardown),
        cmocka_unit_test_teardown(test_log_line_epoch_and_nul, arena_teardown),
        cmocka_unit_test_teardown(test_log_bound_worst_case, arena_teardown),
        cmocka_unit_test(test_utf8_prefix),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
