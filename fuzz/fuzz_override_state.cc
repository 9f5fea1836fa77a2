/*
 * fuzz_override_state.cc - the two small JSON readers that see admin and
 * on-disk input: fl_parse_override (PUT {loc}overrides/...) and
 * fl_state_file_parse (flags_state_file).  Both get the whole input.
 *
 * A state file that parses is written back with fl_state_file_write into a
 * buffer of exactly fl_state_file_bound() bytes, and that output must
 * parse again to the same entries (a round trip).
 */

#include "fuzz_common.h"

#include <string>

namespace {

void check_override(const char *d, size_t n)
{
    fl_override_kind_t kind = FL_OVERRIDE_NONE;
    uint32_t milli = 0xdeadbeef;
    char err[256];
    std::memset(err, 'x', sizeof(err));

    fl_status_t rc = fl_parse_override(d, n, &kind, &milli, err, sizeof(err));
    FUZZ_CHECK(rc == FL_OK || rc == FL_ERR_JSON || rc == FL_ERR_FIELD,
               "fl_parse_override returned %d", static_cast<int>(rc));
    if (rc != FL_OK) {
        fuzz::check_message(err, sizeof(err), "override", false);
        return;
    }
    FUZZ_CHECK((kind == FL_OVERRIDE_OFF && milli == 0)
               || (kind == FL_OVERRIDE_PERCENT && milli <= FL_MILLI_MAX),
               "override kind %d milli %u", static_cast<int>(kind), milli);
}

std::string describe(const fl_saved_flag_t &e)
{
    char b[256];
    std::snprintf(b, sizeof(b), "hash %016llx rb %d %llu %llu %llu ov %d %u",
                  static_cast<unsigned long long>(e.def_hash), e.rolled_back,
                  static_cast<unsigned long long>(e.rollback_at_ms),
                  static_cast<unsigned long long>(e.rollback_errors),
                  static_cast<unsigned long long>(e.rollback_enabled),
                  static_cast<int>(e.override_kind), e.override_milli);
    return std::string(e.project, e.project_len) + "/"
           + std::string(e.flag, e.flag_len) + " " + b;
}

bool same(const fl_saved_flag_t &a, const fl_saved_flag_t &b)
{
    return a.project_len == b.project_len && a.flag_len == b.flag_len
           && std::memcmp(a.project, b.project, a.project_len) == 0
           && std::memcmp(a.flag, b.flag, a.flag_len) == 0
           && a.def_hash == b.def_hash
           && (a.rolled_back != 0) == (b.rolled_back != 0)
           && (!a.rolled_back
               || (a.rollback_at_ms == b.rollback_at_ms
                   && a.rollback_errors == b.rollback_errors
                   && a.rollback_enabled == b.rollback_enabled))
           && a.override_kind == b.override_kind
           && (a.override_kind != FL_OVERRIDE_PERCENT
               || a.override_milli == b.override_milli);
}

void check_state(const char *d, size_t n)
{
    fuzz::Arena arena;
    fl_saved_flag_t *e = nullptr;
    size_t ne = 0;
    char err[256];
    std::memset(err, 'x', sizeof(err));

    fl_status_t rc = fl_state_file_parse(d, n, arena.handle(), &e, &ne, err,
                                         sizeof(err));
    FUZZ_CHECK(rc == FL_OK || rc == FL_ERR_INVALID,
               "fl_state_file_parse returned %d", static_cast<int>(rc));
    if (rc != FL_OK) {
        fuzz::check_message(err, sizeof(err), "state file");
        FUZZ_CHECK(std::strncmp(err, "state file", 10) == 0,
                   "message does not start with \"state file\": %s", err);
        return;
    }
    FUZZ_CHECK(ne == 0 || e != nullptr, "%zu entries at NULL", ne);
    for (size_t i = 0; i < ne; i++) {
        const fl_saved_flag_t &x = e[i];
        FUZZ_CHECK((x.project || !x.project_len) && (x.flag || !x.flag_len),
                   "entry %zu: NULL string", i);
        FUZZ_CHECK(x.override_kind == FL_OVERRIDE_NONE
                   || x.override_kind == FL_OVERRIDE_OFF
                   || (x.override_kind == FL_OVERRIDE_PERCENT
                       && x.override_milli <= FL_MILLI_MAX),
                   "entry %zu: override %d %u", i,
                   static_cast<int>(x.override_kind), x.override_milli);
    }

    size_t bound = fl_state_file_bound(e, ne);
    char *buf = static_cast<char *>(std::malloc(bound));
    FUZZ_CHECK(buf != nullptr, "malloc");
    size_t w = fl_state_file_write(e, ne, buf);
    FUZZ_CHECK(w <= bound, "state file of %zu bytes, bound %zu", w, bound);
    FUZZ_CHECK(w > 0 && buf[w - 1] == '\n', "state file does not end in \\n");
    FUZZ_CHECK(fuzz::json_valid(buf, w), "written state file is not JSON: %.*s",
               static_cast<int>(w), buf);

    fuzz::Arena arena2;
    fl_saved_flag_t *e2 = nullptr;
    size_t ne2 = 0;
    rc = fl_state_file_parse(buf, w, arena2.handle(), &e2, &ne2, err,
                             sizeof(err));
    FUZZ_CHECK(rc == FL_OK, "the written state file does not parse: %s\n%.*s",
               err, static_cast<int>(w), buf);
    FUZZ_CHECK(ne2 == ne, "%zu entries written, %zu read back", ne, ne2);
    for (size_t i = 0; i < ne; i++) {
        FUZZ_CHECK(same(e[i], e2[i]), "entry %zu changed in a round trip:\n"
                   "%s\n%s", i, describe(e[i]).c_str(),
                   describe(e2[i]).c_str());
    }
    std::free(buf);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = reinterpret_cast<const char *>(data);
    check_override(d, size);
    check_state(d, size);
    return 0;
}
