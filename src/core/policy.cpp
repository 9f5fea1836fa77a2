/*
 * policy.cpp - the automatic rollback policy: its built-in default, how a
 * flag's own "rollback" object combines with the http-level
 * flags_rollback, and the decision on a window's counts
 * (docs/evaluation.md, automatic rollback).
 */

#include "flags_core.h"
#include "control.hpp"

extern "C" {

fl_rollback_policy_t fl_rollback_policy_default(void) noexcept
{
    fl_rollback_policy_t p;

    p.mode = FL_ROLLBACK_ON;
    p.min_errors = FL_ROLLBACK_DEFAULT_MIN_ERRORS;
    p.rate_milli = FL_ROLLBACK_DEFAULT_RATE_MILLI;
    p.window = FL_ROLLBACK_DEFAULT_WINDOW;
    p.min_sources = FL_ROLLBACK_DEFAULT_MIN_SOURCES;
    return p;
}

void fl_rollback_policy_resolve(const fl_rollback_policy_t *flag_policy,
    const fl_rollback_policy_t *http_policy, fl_rollback_policy_t *out)
    noexcept
{
    fl_rollback_policy_t http = http_policy != nullptr
                                ? *http_policy : fl_rollback_policy_default();
    fl_rollback_policy_t own;

    if (http.mode != FL_ROLLBACK_OFF) {
        http.mode = FL_ROLLBACK_ON;
    }
    if (http.min_sources == 0) {
        http.min_sources = FL_ROLLBACK_DEFAULT_MIN_SOURCES;
    }
    if (flag_policy == nullptr || flag_policy->mode == FL_ROLLBACK_INHERIT) {
        *out = http;
        return;
    }
    if (flag_policy->mode == FL_ROLLBACK_OFF) {
        /* "rollback": false: off, with the numbers of the http policy so
         * that the window the flag still counts over is the http one */
        *out = http;
        out->mode = FL_ROLLBACK_OFF;
        return;
    }

    /* an object: its gaps (0) come from the http policy, or from the
     * built-in defaults when flags_rollback is off */
    const fl_rollback_policy_t base = http.mode == FL_ROLLBACK_OFF
                                      ? fl_rollback_policy_default() : http;
    own = *flag_policy;
    own.mode = FL_ROLLBACK_ON;
    if (own.min_errors == 0) {
        own.min_errors = base.min_errors;
    }
    if (own.rate_milli == 0) {
        own.rate_milli = base.rate_milli;
    }
    if (own.window == 0) {
        own.window = base.window;
    }
    if (own.min_sources == 0) {
        own.min_sources = base.min_sources;
    }
    *out = own;
}

void fl_rollback_waiting(uint64_t window_errors, uint64_t window_enabled,
    uint64_t window_sources, const fl_rollback_policy_t *policy,
    fl_rollback_wait_t *out) noexcept
{
    out->errors = 0;
    out->rate_errors = 0;
    out->sources = 0;

    if (policy == nullptr) {
        return;
    }
    uint64_t min_errors = policy->min_errors == 0 ? 1 : policy->min_errors;
    uint64_t min_sources = fl::min_sources_of(*policy);

    if (window_errors < min_errors) {
        out->errors = min_errors - window_errors;
    }
    if (window_sources < min_sources) {
        out->sources = min_sources - window_sources;
    }
    if (window_enabled > 0) {
        /* the least errors e with e x 100000 >= rate_milli x enabled */
        unsigned __int128 need = static_cast<unsigned __int128>(policy->rate_milli)
                                 * window_enabled;
        unsigned __int128 e = (need + FL_MILLI_MAX - 1) / FL_MILLI_MAX;
        if (e > window_errors) {
            unsigned __int128 d = e - window_errors;
            out->rate_errors = d > UINT64_MAX ? UINT64_MAX
                                              : static_cast<uint64_t>(d);
        }
    }
}

int fl_rollback_decide(uint64_t window_errors, uint64_t window_enabled,
    uint64_t window_sources, const fl_rollback_policy_t *policy) noexcept
{
    /* Only an explicit OFF disables: INHERIT should have been resolved by
     * the caller, and treating it as ON fails safe for the users. */
    if (policy == nullptr || policy->mode == FL_ROLLBACK_OFF) {
        return 0;
    }
    fl_rollback_wait_t w;

    fl_rollback_waiting(window_errors, window_enabled, window_sources, policy,
                        &w);
    return w.errors == 0 && w.rate_errors == 0 && w.sources == 0;
}

} // extern "C"
