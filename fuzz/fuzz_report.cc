/*
 * fuzz_report.cc - the error report body parser (POST {loc}report/...).
 *
 * The input is the body.  It is parsed twice: in one piece, and in 1..3
 * pieces cut at positions derived from a hash of the input (each piece
 * copied to a buffer of its own size, so a read past a piece is caught),
 * and both parses must agree.  On FL_OK the log line is written into a
 * buffer of exactly fl_report_log_bound() bytes and must fit, end in '\n'
 * and be one JSON object.  A third parse goes through
 * fl_report_parser_feed_whole(), the one-buffer scanner in front of yajl:
 * it must agree with yajl's whole parse byte for byte, error messages
 * included.
 */

#include "fuzz_common.h"

#include <string>

namespace {

const char project[] = "shop\"\\\n\xe2\x80\xa8";    /* escaping in the line */

struct Outcome {
    fl_status_t  rc;
    std::string  line;          /* FL_OK: the log line */
    std::string  err;           /* otherwise: the message */
};

/* fast: the whole body through fl_report_parser_feed_whole() */
Outcome parse(const uint8_t *data, size_t size, const size_t *cuts,
    size_t ncuts, uint64_t now_ms, bool fast = false)
{
    fuzz::Arena arena;
    Outcome o;

    fl_report_parser_t *rp = fl_report_parser_new(arena.handle());
    FUZZ_CHECK(rp != nullptr, "fl_report_parser_new failed");

    size_t at = 0;
    fl_status_t rc = FL_OK;
    /* the whole body outlives the report, which may point into it */
    fuzz::Exact whole(data, fast ? size : 0);
    if (fast) {
        rc = fl_report_parser_feed_whole(
            rp, reinterpret_cast<const unsigned char *>(whole.p), size);
        FUZZ_CHECK(rc == FL_OK || rc == FL_ERR_JSON,
                   "feed_whole returned %d", static_cast<int>(rc));
    }
    for (size_t i = 0; !fast && i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : size;
        fuzz::Exact piece(data + at, end - at);
        fl_status_t r = fl_report_parser_feed(
            rp, reinterpret_cast<const unsigned char *>(piece.p), end - at);
        FUZZ_CHECK(r == FL_OK || r == FL_ERR_JSON,
                   "feed returned %d", static_cast<int>(r));
        /* sticky: once an error, always that error */
        FUZZ_CHECK(rc == FL_OK || r == rc, "feed error not sticky");
        rc = r;
        at = end;
    }

    fl_report_t rep;
    std::memset(&rep, 0, sizeof(rep));
    char err[256];
    std::memset(err, 'x', sizeof(err));
    o.rc = fl_report_parser_finish(rp, &rep, err, sizeof(err));
    FUZZ_CHECK(o.rc == FL_OK || o.rc == FL_ERR_JSON || o.rc == FL_ERR_FIELD,
               "finish returned %d", static_cast<int>(o.rc));
    FUZZ_CHECK(rc == FL_OK || o.rc == rc, "finish forgot the feed error");

    if (o.rc != FL_OK) {
        fuzz::check_message(err, sizeof(err), "report", false);
        o.err = err;
        /* finishing twice must not crash */
        fl_report_t again;
        (void) fl_report_parser_finish(rp, &again, err, sizeof(err));
        return o;
    }

    FUZZ_CHECK(rep.flag_name != nullptr || rep.flag_name_len == 0,
               "flag_name NULL with a length");
    FUZZ_CHECK(rep.message != nullptr || rep.message_len == 0,
               "message NULL with a length");
    if (rep.traits_json != nullptr) {
        FUZZ_CHECK(fuzz::json_valid(rep.traits_json, rep.traits_json_len),
                   "traits_json is not valid JSON: %.*s",
                   static_cast<int>(rep.traits_json_len), rep.traits_json);
        FUZZ_CHECK(rep.traits_json_len >= 2 && rep.traits_json[0] == '{'
                   && rep.traits_json[rep.traits_json_len - 1] == '}',
                   "traits_json is not an object");
    }

    /* the reporter as a caller: within the limits, sorted, unique (its
     * memory apart: the bound below is the parser's) */
    fuzz::Arena users;
    fl_user_t u;
    fl_cohort_t c = fl_report_cohort(&rep, 4, users.handle(), &u);
    FUZZ_CHECK(c == FL_COHORT_ON || c == FL_COHORT_OFF
               || c == FL_COHORT_EVALUATE, "cohort %d", static_cast<int>(c));
    /* a caller comes with an evaluation, or with a claimed cohort that
     * it lets the server check (fl_report_disputed()) */
    FUZZ_CHECK(c == FL_COHORT_EVALUATE || rep.has_enabled
               || (u.user_id == nullptr && u.ntraits == 0),
               "a caller without an evaluation or a claim");
    FUZZ_CHECK(fl_report_disputed(&rep, 1) == (rep.has_enabled && !rep.enabled)
               && fl_report_disputed(&rep, 0) == (rep.has_enabled && rep.enabled),
               "a dispute is a claim the evaluation contradicts");
    FUZZ_CHECK(!rep.has_enabled || c == (rep.enabled ? FL_COHORT_ON
                                                     : FL_COHORT_OFF),
               "\"enabled\" not obeyed");
    FUZZ_CHECK(u.ntraits <= 4 && (u.user_id == nullptr
                                  || u.user_id_len <= FL_MAX_VALUE_LEN),
               "a caller over the limits");
    for (size_t i = 1; i < u.ntraits; i++) {
        size_t a = u.traits[i - 1].name_len, b = u.traits[i].name_len;
        int cmp = std::memcmp(u.traits[i - 1].name, u.traits[i].name,
                              a < b ? a : b);
        FUZZ_CHECK(cmp < 0 || (cmp == 0 && a < b), "traits not sorted");
    }

    /* the same caller when the traits are read again from traits_json
     * (rep.traits is the parser's own reading of them) */
    fl_report_t text = rep;
    text.traits = nullptr;
    fl_user_t again;
    FUZZ_CHECK(fl_report_cohort(&text, 4, users.handle(), &again) == c,
               "another cohort from traits_json");
    FUZZ_CHECK((u.user_id == nullptr) == (again.user_id == nullptr)
               && u.user_id_len == again.user_id_len
               && u.ntraits == again.ntraits,
               "another caller from traits_json");
    for (size_t i = 0; i < u.ntraits; i++) {
        const fl_trait_t &x = u.traits[i], &y = again.traits[i];
        FUZZ_CHECK(x.name_len == y.name_len && x.value_len == y.value_len
                   && std::memcmp(x.name, y.name, x.name_len) == 0
                   && std::memcmp(x.value, y.value, x.value_len) == 0,
                   "trait %zu differs when read from traits_json", i);
    }

    size_t bound = fl_report_log_bound(&rep, sizeof(project) - 1);
    char *buf = static_cast<char *>(std::malloc(bound ? bound : 1));
    FUZZ_CHECK(buf != nullptr, "malloc");
    size_t n = fl_report_log_line(&rep, project, sizeof(project) - 1, now_ms,
                                  buf);
    FUZZ_CHECK(n <= bound, "log line of %zu bytes over its bound %zu",
               n, bound);
    FUZZ_CHECK(n > 0 && buf[n - 1] == '\n', "log line does not end in \\n");
    FUZZ_CHECK(std::memchr(buf, '\n', n - 1) == nullptr,
               "log line has a line break inside");
    FUZZ_CHECK(n > 1 && fuzz::json_valid(buf, n - 1),
               "log line is not valid JSON: %.*s", static_cast<int>(n), buf);
    o.line.assign(buf, n);
    std::free(buf);

    /* Memory from the pool is bounded by a small multiple of the body
     * (report.cpp promises it; a body is at most client_max_body_size). */
    FUZZ_CHECK(arena.requested() <= 32 * size + 64 * 1024,
               "%zu bytes allocated for a %zu-byte body",
               arena.requested(), size);
    return o;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t h = fuzz::mix64(fuzz::hash64(data, size));

    /* A plausible clock: 1970 .. 2100. */
    uint64_t now_ms = h % UINT64_C(4102444800000);

    size_t cuts[2];
    size_t ncuts = static_cast<size_t>((h >> 40) % 3);     /* 1..3 pieces */
    for (size_t i = 0; i < ncuts; i++) {
        cuts[i] = static_cast<size_t>(fuzz::mix64(h + i + 1) % (size + 1));
    }
    if (ncuts == 2 && cuts[0] > cuts[1]) {
        size_t t = cuts[0]; cuts[0] = cuts[1]; cuts[1] = t;
    }

    Outcome split = parse(data, size, cuts, ncuts, now_ms);
    Outcome whole = parse(data, size, nullptr, 0, now_ms);
    Outcome fast = parse(data, size, nullptr, 0, now_ms, true);

    FUZZ_CHECK(fast.rc == whole.rc && fast.err == whole.err,
               "the scanner and yajl disagree: %d \"%s\", yajl %d \"%s\"",
               static_cast<int>(fast.rc), fast.err.c_str(),
               static_cast<int>(whole.rc), whole.err.c_str());
    FUZZ_CHECK(fast.line == whole.line,
               "the scanner and yajl disagree:\n%s%s",
               fast.line.c_str(), whole.line.c_str());

    FUZZ_CHECK(split.rc == whole.rc,
               "status depends on the pieces: %d in %zu pieces, %d whole",
               static_cast<int>(split.rc), ncuts + 1,
               static_cast<int>(whole.rc));
    FUZZ_CHECK(split.line == whole.line,
               "log line depends on the pieces:\n%s%s",
               split.line.c_str(), whole.line.c_str());
    return 0;
}
