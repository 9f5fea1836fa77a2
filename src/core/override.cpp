/*
 * override.cpp - the body of PUT {loc}overrides/<project>/<flag>
 * (docs/api.md): {"enabled": false} or {"rolloutPercentage": N}.
 *
 * Decisions:
 *  - null for either key reads as absent, as in error reports;
 *  - {"enabled": true} is refused: an override can only switch a flag off
 *    or set its percentage; DELETE removes it;
 *  - the percentage is read exactly from the number's text (1.25e1 is
 *    12.5); at most 3 decimals, like the flags file;
 *  - unknown fields are ignored; duplicate keys: the last one wins.
 */

#include "flags_core.h"
#include "arena.hpp"
#include "json_reader.hpp"
#include "number.hpp"
#include "text.hpp"

namespace fl {

fl_status_t override_from_json(const jval *obj, fl_override_kind_t *kind,
    uint32_t *milli, char *err, size_t err_len) noexcept
{
    const jval *en = jget(obj, "enabled");
    const jval *rp = jget(obj, "rolloutPercentage");

    if (en != nullptr && rp != nullptr) {
        set_err(err, err_len,
                "give either enabled or rolloutPercentage, not both");
        return FL_ERR_FIELD;
    }
    if (en != nullptr) {
        if (en->kind == J_TRUE) {
            set_err(err, err_len,
                    "enabled can only be false; DELETE the override to remove it");
            return FL_ERR_FIELD;
        }
        if (en->kind != J_FALSE) {
            set_err(err, err_len, "enabled must be false");
            return FL_ERR_FIELD;
        }
        *kind = FL_OVERRIDE_OFF;
        *milli = 0;
        return FL_OK;
    }
    if (rp != nullptr) {
        if (rp->kind != J_NUMBER) {
            set_err(err, err_len, "rolloutPercentage must be a number");
            return FL_ERR_FIELD;
        }
        uint32_t m = 0;
        switch (parse_milli(rp->str, rp->len, &m)) {
        case FL_MILLI_OK:
            *kind = FL_OVERRIDE_PERCENT;
            *milli = m;
            return FL_OK;
        case FL_MILLI_DECIMALS:
            set_err(err, err_len, "rolloutPercentage must have at most 3 decimals");
            return FL_ERR_FIELD;
        default:
            set_err(err, err_len, "rolloutPercentage must be between 0 and 100");
            return FL_ERR_FIELD;
        }
    }
    set_err(err, err_len,
            "expected {\"enabled\": false} or {\"rolloutPercentage\": N}");
    return FL_ERR_FIELD;
}

/* An admin body: a JSON object, parsed into a local arena (no allocator
 * is given), handed to read(root), which gives the answer. */
template <class F>
fl_status_t admin_body(const char *body, size_t len, char *err,
    size_t err_len, F read) noexcept
{
    try {
        malloc_arena arena;
        jval *root = nullptr;

        if (body == nullptr) {
            len = 0;
            body = "";
        }
        fl_status_t rc = jparse(body, len, arena.handle(), FL_REPORT_MAX_DEPTH,
                                "request body", &root, err, err_len);
        if (rc != FL_OK) {
            return rc;
        }
        if (root->kind != J_OBJECT) {
            set_err(err, err_len, "request body must be a JSON object");
            return FL_ERR_JSON;
        }
        return read(root);
    } catch (...) {
        set_err(err, err_len, "internal error");
        return FL_ERR_INTERNAL;
    }
}

} // namespace fl

extern "C" {

fl_status_t fl_parse_override(const char *body, size_t len,
    fl_override_kind_t *kind, uint32_t *milli, char *err, size_t err_len) noexcept
{
    return fl::admin_body(body, len, err, err_len, [&](const fl::jval *root) {
        return fl::override_from_json(root, kind, milli, err, err_len);
    });
}

fl_status_t fl_parse_ramp_action(const char *body, size_t len,
    fl_ramp_action_t *action, char *err, size_t err_len) noexcept
{
    return fl::admin_body(body, len, err, err_len, [&](const fl::jval *root) {
        const fl::jval *a = fl::jget(root, "action");
        if (a == nullptr || a->kind != fl::J_STRING
            || fl_ramp_action_parse(a->str, a->len, action) != 0)
        {
            fl::set_err(err, err_len,
                        "action must be \"pause\", \"resume\", \"advance\" or"
                        " \"restart\"");
            return FL_ERR_FIELD;
        }
        return FL_OK;
    });
}

} // extern "C"
