/*
 * fuzz_loader.cc - fl_project_load_buffer, the flags file loader.
 *
 * Input: a flags file.  On failure the message must be one line; on
 * success every flag is looked at through the public API, the /flags
 * answer and every flag's status object are written into buffers of
 * exactly their bound and must fit and be valid JSON.  The project is
 * freed after each input (LeakSanitizer checks the loader's cleanup).
 */

#include "fuzz_common.h"

#include <string>
#include <vector>

namespace {

void check_status_json(const fl_project_t *p, size_t i,
    const fl_state_snapshot_t *s)
{
    size_t bound = fl_status_flag_json_bound(p, i);
    FUZZ_CHECK(bound > 0, "status bound 0 for flag %zu", i);
    char *buf = static_cast<char *>(std::malloc(bound));
    FUZZ_CHECK(buf != nullptr, "malloc");
    for (int counted = 0; counted <= 1; counted++) {
        size_t n = fl_status_flag_json(p, i, s, counted, buf);
        FUZZ_CHECK(n <= bound, "fl_status_flag_json wrote %zu bytes, bound %zu",
                   n, bound);
        FUZZ_CHECK(fuzz::json_valid(buf, n), "status object is not valid JSON: %.*s",
                   static_cast<int>(n), buf);
    }
    std::free(buf);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fl_project_t *p = nullptr;
    char err[512];
    std::memset(err, 'x', sizeof(err));

    fl_status_t rc = fl_project_load_buffer(reinterpret_cast<const char *>(data),
                                            size, "fuzz.json", &p, err,
                                            sizeof(err));
    if (rc != FL_OK) {
        FUZZ_CHECK(rc == FL_ERR_INVALID, "load returned %d: %s",
                   static_cast<int>(rc), err);
        FUZZ_CHECK(p == nullptr, "project set on failure");
        fuzz::check_message(err, sizeof(err), "loader");
        FUZZ_CHECK(std::strncmp(err, "fuzz.json", 9) == 0,
                   "message does not name the source: %s", err);
        /* a small error buffer must be cut, not overrun */
        char small[8];
        fl_project_t *q = nullptr;
        (void) fl_project_load_buffer(reinterpret_cast<const char *>(data),
                                      size, "fuzz.json", &q, small,
                                      sizeof(small));
        FUZZ_CHECK(q == nullptr && std::memchr(small, '\0', sizeof(small)),
                   "small error buffer");
        return 0;
    }
    FUZZ_CHECK(p != nullptr, "FL_OK without a project");

    size_t n = fl_project_flag_count(p);
    for (size_t i = 0; i < n; i++) {
        fl_flag_info_t info;
        FUZZ_CHECK(fl_project_flag_info(p, i, &info) == 0, "flag_info %zu", i);
        FUZZ_CHECK(info.name != nullptr && info.name_len >= 1
                   && info.name_len <= 128
                   && std::strlen(info.name) == info.name_len,
                   "flag %zu: bad name", i);
        FUZZ_CHECK(info.rollout_milli <= FL_MILLI_MAX, "flag %zu: rollout %u",
                   i, info.rollout_milli);
        FUZZ_CHECK(info.enabled == 0 || info.enabled == 1, "flag %zu: enabled",
                   i);
        const fl_rollback_policy_t &rb = info.rollback;
        FUZZ_CHECK(rb.mode == FL_ROLLBACK_INHERIT || rb.mode == FL_ROLLBACK_OFF
                   || rb.mode == FL_ROLLBACK_ON, "flag %zu: rollback mode", i);
        FUZZ_CHECK(rb.rate_milli <= FL_MILLI_MAX && rb.window <= FL_WINDOW_MAX,
                   "flag %zu: rollback rate %u window %u", i, rb.rate_milli,
                   rb.window);
        FUZZ_CHECK(fl_project_find_flag(p, info.name, info.name_len)
                   == static_cast<long>(i), "find_flag(flag %zu)", i);

        for (size_t j = 0; j < info.nsegments; j++) {
            size_t len = 0;
            const char *s = fl_project_flag_segment(p, i, j, &len);
            FUZZ_CHECK(s != nullptr && len >= 1 && len <= 128
                       && std::strlen(s) == len,
                       "flag %zu segment %zu", i, j);
        }
        FUZZ_CHECK(fl_project_flag_segment(p, i, info.nsegments, nullptr)
                   == nullptr, "segment past the end of flag %zu", i);

        /* names that are not flags */
        std::string other(info.name, info.name_len);
        other.push_back('\x01');
        FUZZ_CHECK(fl_project_find_flag(p, other.data(), other.size()) == -1,
                   "find_flag found a longer name");
        FUZZ_CHECK(fl_project_find_flag(p, info.name, info.name_len - 1) == -1
                   || fl_project_find_flag(p, info.name, info.name_len - 1)
                      != static_cast<long>(i), "find_flag of a prefix");
    }
    fl_flag_info_t none;
    FUZZ_CHECK(fl_project_flag_info(p, n, &none) == -1, "flag_info past end");
    FUZZ_CHECK(fl_project_flag_segment(p, n, 0, nullptr) == nullptr,
               "segment of a flag past the end");
    (void) fl_project_find_flag(p, reinterpret_cast<const char *>(data),
                                size < 129 ? size : 129);

    /* The /flags answer: as evaluated for nobody, then with the widest
     * numbers and every flag on. */
    std::vector<fl_detail_t> r(n + 1);
    fl_user_t nobody = { nullptr, 0, nullptr, 0 };
    fl_evaluate_detail(p, &nobody, nullptr, NULL, r.data());
    fuzz::check_flags_json(p, r.data());
    static const uint32_t wide[] = { 33333, 100000, 12345, 99999, 0, 1, 10 };
    for (size_t i = 0; i < n; i++) {
        r[i].enabled = 1;
        r[i].rollout_milli = wide[i % (sizeof(wide) / sizeof(wide[0]))];
    }
    fuzz::check_flags_json(p, r.data());

    /* The flags_status object of each flag, quiet and busy states. */
    fl_state_snapshot_t quiet, busy;
    std::memset(&quiet, 0, sizeof(quiet));
    std::memset(&busy, 0, sizeof(busy));
    busy.def_hash = UINT64_MAX;
    busy.window_seconds = FL_WINDOW_MAX;
    busy.evaluations = busy.enabled_evaluations = busy.errors = UINT64_MAX;
    busy.window_enabled = busy.window_errors = UINT64_MAX;
    busy.rolled_back = 1;
    busy.rollback_at_ms = UINT64_C(4102444799999);     /* 2099-12-31 */
    busy.rollback_errors = busy.rollback_enabled = UINT64_MAX;
    busy.override_kind = FL_OVERRIDE_PERCENT;
    busy.override_milli = 33333;
    for (size_t i = 0; i < n; i++) {
        check_status_json(p, i, &quiet);
        check_status_json(p, i, &busy);
    }

    fl_project_free(p);
    return 0;
}
