/*
 * statefile.cpp - the flags_state_file (docs/operations.md): what must survive a
 * restart, i.e. rollbacks and overrides, each tied to the definition hash
 * of its flag so that an edited flag starts clean.
 *
 * Format (version 1), one entry per line to keep diffs readable:
 *
 *   {"version":1,"flags":[
 *   {"project":"shop","flag":"x","definitionHash":"00c0ffee12345678",
 *    "rollback":{"at":1795352709123,"errors":25,"enabledEvaluations":100,
 *                "sources":4,"decidedBy":"rule"},
 *    "override":null},
 *   ...
 *   ]}
 *
 *  - definitionHash: 16 hex digits (a JSON number would lose 64-bit
 *    precision in most readers);
 *  - rollback: null, or at (ms since the epoch, UTC), errors and
 *    enabledEvaluations as non-negative integers; sources (an integer)
 *    and decidedBy ("rule" or "fleet") are optional: files written before
 *    they existed restore with 0 and unknown;
 *  - override: null, {"enabled":false} or {"rolloutPercentage":N}.
 *  - ramp (optional, docs/ramps.md): a started ramp's state,
 *    {"state":"running","stage":1,"startedAt":MS,"stageStartedAt":MS,
 *     "pausedAt":MS,"nextTickAt":MS,"stageOn":N,"stageOff":N,
 *     "stageChanges":N,"cause":N,"decidedAt":MS,"stalled":0|1,
 *     "decided":[n1,n0,e1,e0],"evidence":{"logLr":[5 numbers],
 *     "ticks":N,"errorsOn":N,"errorsOff":N,"decidedTick":N,"decided":0|1}}
 *    The tick's baselines are not kept: after a restart the first tick
 *    takes the new zone's totals as its base.
 *
 * The reader is strict about what it needs (the caller logs the message
 * and ignores the whole file: never fatal) and lenient about the rest:
 * unknown fields are ignored, "rollback" and "override" may be absent, and
 * entries are returned in file order, duplicates included (the caller
 * applies them in order, so the last one wins).
 */

#include "flags_core.h"
#include "arena.hpp"
#include "control.hpp"
#include "json_reader.hpp"
#include "json_writer.hpp"
#include "number.hpp"
#include "text.hpp"
#include "utf8.hpp"

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr unsigned max_depth = 64;

bool parse_hash(const fl::jval *v, uint64_t *out)
{
    if (v == nullptr || v->kind != fl::J_STRING || v->len != 16) {
        return false;
    }
    uint64_t h = 0;
    for (size_t i = 0; i < 16; i++) {
        int d = fl::hex_value(static_cast<unsigned char>(v->str[i]));
        if (d < 0) {
            return false;
        }
        h = h << 4 | static_cast<uint64_t>(d);
    }
    *out = h;
    return true;
}

bool get_u64(const fl::jval *obj, const char *key, uint64_t *out)
{
    const fl::jval *v = fl::jget(obj, key);
    return v != nullptr && v->kind == fl::J_NUMBER
           && fl::parse_u64(v->str, v->len, out);
}

const char *const ramp_states[] = {"pending", "running", "holding", "paused",
                                   "done", "rolledBack"};

/* The numbers of a ramp's state, in the order written. */
struct ramp_field {
    const char  *name;
    size_t       offset;
};

const ramp_field ramp_fields[] = {
    {"stage", offsetof(fl_ramp_t, stage)},
    {"startedAt", offsetof(fl_ramp_t, start_ms)},
    {"stageStartedAt", offsetof(fl_ramp_t, stage_ms)},
    {"pausedAt", offsetof(fl_ramp_t, paused_ms)},
    {"nextTickAt", offsetof(fl_ramp_t, next_tick_ms)},
    {"stageOn", offsetof(fl_ramp_t, stage_on)},
    {"stageOff", offsetof(fl_ramp_t, stage_off)},
    {"stageChanges", offsetof(fl_ramp_t, stage_changes)},
    {"cause", offsetof(fl_ramp_t, cause)},
    {"decidedAt", offsetof(fl_ramp_t, decided_ms)},
    {"stalled", offsetof(fl_ramp_t, stalled)},
};

const ramp_field ramp_decided[] = {
    {"n1", offsetof(fl_ramp_t, decided_n1)},
    {"n0", offsetof(fl_ramp_t, decided_n0)},
    {"e1", offsetof(fl_ramp_t, decided_e1)},
    {"e0", offsetof(fl_ramp_t, decided_e0)},
};

uint64_t *word(fl_ramp_t *r, size_t offset)
{
    return reinterpret_cast<uint64_t *>(reinterpret_cast<char *>(r) + offset);
}

bool get_double(const fl::jval *v, double *out)
{
    if (v == nullptr || v->kind != fl::J_NUMBER || v->len >= 64) {
        return false;
    }
    char buf[64];
    std::memcpy(buf, v->str, v->len);
    buf[v->len] = '\0';
    char *end = nullptr;
    double d = std::strtod(buf, &end);
    if (end != buf + v->len || !std::isfinite(d)) {
        return false;
    }
    *out = d;
    return true;
}

bool parse_evidence(const fl::jval *ev, fl_regression_t *r)
{
    const fl::jval *l = fl::jget(ev, "logLr");
    if (l == nullptr || l->kind != fl::J_ARRAY
        || l->count != FL_REGRESSION_GRID)
    {
        return false;
    }
    size_t k = 0;
    for (const fl::jval *x = l->first; x != nullptr; x = x->next, k++) {
        if (!get_double(x, &r->log_lr[k])) {
            return false;
        }
    }
    uint64_t decided = 0;
    if (!get_u64(ev, "ticks", &r->ticks)
        || !get_u64(ev, "errorsOn", &r->errors_on)
        || !get_u64(ev, "errorsOff", &r->errors_off)
        || !get_u64(ev, "decidedTick", &r->decided_tick)
        || !get_u64(ev, "decided", &decided) || decided > 1)
    {
        return false;
    }
    r->decided = static_cast<uint32_t>(decided);
    return true;
}

bool parse_ramp(const fl::jval *v, fl_ramp_t *r)
{
    fl_ramp_init(r);
    if (v->kind != fl::J_OBJECT) {
        return false;
    }
    const fl::jval *state = fl::jget(v, "state");
    if (state == nullptr || state->kind != fl::J_STRING) {
        return false;
    }
    bool known = false;
    for (size_t k = 0; k < sizeof(ramp_states) / sizeof(ramp_states[0]); k++)
    {
        if (std::strlen(ramp_states[k]) == state->len
            && std::memcmp(ramp_states[k], state->str, state->len) == 0)
        {
            r->state = k;
            known = true;
        }
    }
    if (!known) {
        return false;
    }
    for (const ramp_field &f : ramp_fields) {
        if (!get_u64(v, f.name, word(r, f.offset))) {
            return false;
        }
    }
    const fl::jval *d = fl::jget(v, "decided");
    if (d == nullptr || d->kind != fl::J_OBJECT) {
        return false;
    }
    for (const ramp_field &f : ramp_decided) {
        if (!get_u64(d, f.name, word(r, f.offset))) {
            return false;
        }
    }
    const fl::jval *ev = fl::jget(v, "evidence");
    return ev != nullptr && ev->kind == fl::J_OBJECT
           && parse_evidence(ev, &r->evidence);
}

char *put_ramp(char *o, const fl_ramp_t *rs)
{
    fl_ramp_t r;
    fl_ramp_read(rs, &r);

    o = fl::put_lit(o, ",\"ramp\":{\"state\":");
    const char *name = ramp_states[r.state < 6 ? r.state : 0];
    o = fl::put_str(o, name, std::strlen(name));
    for (const ramp_field &f : ramp_fields) {
        *o++ = ',';
        o = fl::put_str(o, f.name, std::strlen(f.name));
        *o++ = ':';
        o += fl::put_u64(*word(&r, f.offset), o);
    }
    o = fl::put_lit(o, ",\"decided\":{");
    for (const ramp_field &f : ramp_decided) {
        if (f.offset != ramp_decided[0].offset) {
            *o++ = ',';
        }
        o = fl::put_str(o, f.name, std::strlen(f.name));
        *o++ = ':';
        o += fl::put_u64(*word(&r, f.offset), o);
    }
    o = fl::put_lit(o, "},\"evidence\":{\"logLr\":[");
    for (int k = 0; k < FL_REGRESSION_GRID; k++) {
        double l = r.evidence.log_lr[k];
        if (!std::isfinite(l)) {
            l = l > 0 ? 1e300 : -1e300;
        }
        int n = std::snprintf(o, 32, "%s%.17g", k ? "," : "", l);
        o += n > 0 && n < 32 ? n : 0;
    }
    o = fl::put_lit(o, "],\"ticks\":");
    o += fl::put_u64(r.evidence.ticks, o);
    o = fl::put_lit(o, ",\"errorsOn\":");
    o += fl::put_u64(r.evidence.errors_on, o);
    o = fl::put_lit(o, ",\"errorsOff\":");
    o += fl::put_u64(r.evidence.errors_off, o);
    o = fl::put_lit(o, ",\"decidedTick\":");
    o += fl::put_u64(r.evidence.decided_tick, o);
    o = fl::put_lit(o, ",\"decided\":");
    o += fl::put_u64(r.evidence.decided ? 1 : 0, o);
    return fl::put_lit(o, "}}");
}

/* Bytes of put_ramp(): names and punctuation, 15 20-digit integers, five
 * 25-byte doubles. */
constexpr size_t ramp_bound = 1024;

fl_status_t parse_entry(const fl::jval *e, size_t i, fl_saved_flag_t *out,
    const fl_alloc_t *a, char *err, size_t err_len)
{
    using fl::jval;

    if (e->kind != fl::J_OBJECT) {
        fl::set_err(err, err_len, "flags[%zu] must be an object", i);
        return FL_ERR_INVALID;
    }

    const jval *project = fl::jget(e, "project");
    const jval *flag = fl::jget(e, "flag");
    if (project == nullptr || project->kind != fl::J_STRING) {
        fl::set_err(err, err_len, "flags[%zu].project must be a string", i);
        return FL_ERR_INVALID;
    }
    if (flag == nullptr || flag->kind != fl::J_STRING) {
        fl::set_err(err, err_len, "flags[%zu].flag must be a string", i);
        return FL_ERR_INVALID;
    }
    /* names are written back escaped: a name that is not UTF-8 would not
     * survive the round trip, and no project or flag can have one */
    if (!fl::utf8_valid(project->str, project->len)
        || !fl::utf8_valid(flag->str, flag->len))
    {
        fl::set_err(err, err_len, "flags[%zu]: names must be valid UTF-8", i);
        return FL_ERR_INVALID;
    }
    out->project = project->str;
    out->project_len = project->len;
    out->flag = flag->str;
    out->flag_len = flag->len;

    if (!parse_hash(fl::jget(e, "definitionHash"), &out->def_hash)) {
        fl::set_err(err, err_len,
                    "flags[%zu].definitionHash must be a string of 16 hex digits", i);
        return FL_ERR_INVALID;
    }

    const jval *rb = fl::jget(e, "rollback");
    if (rb != nullptr) {
        if (rb->kind != fl::J_OBJECT) {
            fl::set_err(err, err_len, "flags[%zu].rollback must be an object or null", i);
            return FL_ERR_INVALID;
        }
        static const char *const keys[3] = { "at", "errors", "enabledEvaluations" };
        uint64_t *dst[3] = { &out->rollback_at_ms, &out->rollback_errors,
                             &out->rollback_enabled };
        for (int k = 0; k < 3; k++) {
            if (!get_u64(rb, keys[k], dst[k])) {
                fl::set_err(err, err_len,
                            "flags[%zu].rollback.%s must be a non-negative integer",
                            i, keys[k]);
                return FL_ERR_INVALID;
            }
        }
        if (fl::jget(rb, "sources") != nullptr
            && !get_u64(rb, "sources", &out->rollback_sources))
        {
            fl::set_err(err, err_len,
                        "flags[%zu].rollback.sources must be a non-negative integer",
                        i);
            return FL_ERR_INVALID;
        }
        const jval *by = fl::jget(rb, "decidedBy");
        if (by != nullptr) {
            out->rollback_by = by->kind == fl::J_STRING
                               ? fl::decided_from(by->str, by->len)
                               : FL_DECIDED_UNKNOWN;
            if (out->rollback_by == FL_DECIDED_UNKNOWN) {
                fl::set_err(err, err_len,
                            "flags[%zu].rollback.decidedBy must be \"rule\" or \"fleet\"",
                            i);
                return FL_ERR_INVALID;
            }
        }
        out->rolled_back = 1;
    }

    const jval *ov = fl::jget(e, "override");
    if (ov != nullptr) {
        if (ov->kind != fl::J_OBJECT) {
            fl::set_err(err, err_len, "flags[%zu].override must be an object or null", i);
            return FL_ERR_INVALID;
        }
        char why[128];
        if (fl::override_from_json(ov, &out->override_kind, &out->override_milli,
                                   why, sizeof(why)) != FL_OK)
        {
            fl::set_err(err, err_len, "flags[%zu].override: %s", i, why);
            return FL_ERR_INVALID;
        }
    }

    const jval *ramp = fl::jget(e, "ramp");
    if (ramp != nullptr && ramp->kind != fl::J_NULL) {
        out->ramp = fl::alloc_array<fl_ramp_t>(a, 1);
        if (out->ramp == nullptr) {
            fl::set_err(err, err_len, "out of memory");
            return FL_ERR_NOMEM;
        }
        if (!parse_ramp(ramp, out->ramp)) {
            fl::set_err(err, err_len, "flags[%zu].ramp is not a ramp's state",
                        i);
            return FL_ERR_INVALID;
        }
    }
    return FL_OK;
}

fl_status_t parse(const char *data, size_t len, const fl_alloc_t *a,
    fl_saved_flag_t **out, size_t *n, char *err, size_t err_len)
{
    using fl::jval;

    jval *root = nullptr;
    char why[256];
    fl_status_t rc = fl::jparse(data, len, a, max_depth, "state file", &root,
                                why, sizeof(why));
    if (rc != FL_OK) {
        /* Every message names the file, as the caller logs it as is. */
        bool named = std::strncmp(why, "state file", 10) == 0;
        fl::set_err(err, err_len, "%s%s", named ? "" : "state file: ", why);
        return rc == FL_ERR_NOMEM ? rc : FL_ERR_INVALID;
    }
    if (root->kind != fl::J_OBJECT) {
        fl::set_err(err, err_len, "state file must be a JSON object");
        return FL_ERR_INVALID;
    }

    uint64_t version = 0;
    if (!get_u64(root, "version", &version) || version != 1) {
        fl::set_err(err, err_len, "state file version must be 1");
        return FL_ERR_INVALID;
    }

    const jval *flags = fl::jget(root, "flags");
    if (flags == nullptr || flags->kind != fl::J_ARRAY) {
        fl::set_err(err, err_len, "state file: flags must be an array");
        return FL_ERR_INVALID;
    }

    fl_saved_flag_t *v = fl::alloc_array<fl_saved_flag_t>(a, flags->count);
    if (v == nullptr) {
        fl::set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    }

    size_t i = 0;
    for (const jval *e = flags->first; e != nullptr; e = e->next, i++) {
        std::memset(&v[i], 0, sizeof(v[i]));
        v[i].override_kind = FL_OVERRIDE_NONE;
        char msg[256];
        rc = parse_entry(e, i, &v[i], a, msg, sizeof(msg));
        if (rc != FL_OK) {
            fl::set_err(err, err_len, "state file: %s", msg);
            return rc;
        }
    }

    *out = v;
    *n = i;
    return FL_OK;
}

/* Per entry, beyond its two escaped strings: the member names, braces,
 * 16 hex digits, three 20-digit integers, a percentage of at most 8
 * bytes and ",\n" come to about 210 bytes. */
constexpr size_t entry_fixed = 320;
constexpr size_t doc_fixed = 32;       /* {"version":1,"flags":[\n ... ]}\n */

} // namespace

extern "C" {

fl_status_t fl_state_file_parse(const char *data, size_t len,
    const fl_alloc_t *a, fl_saved_flag_t **out, size_t *n,
    char *err, size_t err_len) noexcept
{
    try {
        if (out == nullptr || n == nullptr || a == nullptr) {
            fl::set_err(err, err_len, "internal error");
            return FL_ERR_INTERNAL;
        }
        *out = nullptr;
        *n = 0;
        if (data == nullptr) {
            data = "";
            len = 0;
        }
        return parse(data, len, a, out, n, err, err_len);
    } catch (...) {
        fl::set_err(err, err_len, "internal error");
        return FL_ERR_INTERNAL;
    }
}

size_t fl_state_file_bound(const fl_saved_flag_t *e, size_t n) noexcept
{
    size_t b = doc_fixed;

    for (size_t i = 0; i < n; i++) {
        b += entry_fixed + fl::str_bound(e[i].project_len) + fl::str_bound(e[i].flag_len);
        if (e[i].ramp != nullptr) {
            b += ramp_bound;
        }
    }
    return b;
}

size_t fl_state_file_write(const fl_saved_flag_t *e, size_t n, char *buf) noexcept
{
    char *o = buf;

    o = fl::put_lit(o, "{\"version\":1,\"flags\":[");
    for (size_t i = 0; i < n; i++) {
        const fl_saved_flag_t &f = e[i];

        if (i != 0) {
            *o++ = ',';
        }
        *o++ = '\n';
        o = fl::put_lit(o, "{\"project\":");
        o = fl::put_str(o, f.project == nullptr ? "" : f.project,
                        f.project == nullptr ? 0 : f.project_len);
        o = fl::put_lit(o, ",\"flag\":");
        o = fl::put_str(o, f.flag == nullptr ? "" : f.flag,
                        f.flag == nullptr ? 0 : f.flag_len);
        o = fl::put_lit(o, ",\"definitionHash\":\"");
        for (int s = 60; s >= 0; s -= 4) {
            *o++ = fl::hex_digits[(f.def_hash >> s) & 0xf];
        }
        o = fl::put_lit(o, "\",\"rollback\":");
        if (f.rolled_back) {
            o = fl::put_lit(o, "{\"at\":");
            o += fl::put_u64(f.rollback_at_ms, o);
            o = fl::put_lit(o, ",\"errors\":");
            o += fl::put_u64(f.rollback_errors, o);
            o = fl::put_lit(o, ",\"enabledEvaluations\":");
            o += fl::put_u64(f.rollback_enabled, o);
            o = fl::put_lit(o, ",\"sources\":");
            o += fl::put_u64(f.rollback_sources, o);
            const char *by = fl::decided_name(f.rollback_by);
            if (by != nullptr) {
                o = fl::put_lit(o, ",\"decidedBy\":");
                o = fl::put_str(o, by, std::strlen(by));
            }
            *o++ = '}';
        } else {
            o = fl::put_lit(o, "null");
        }
        o = fl::put_lit(o, ",\"override\":");
        o = fl::put_override(o, f.override_kind, f.override_milli);
        if (f.ramp != nullptr) {
            o = put_ramp(o, f.ramp);
        }
        *o++ = '}';
    }
    if (n != 0) {
        *o++ = '\n';
    }
    o = fl::put_lit(o, "]}\n");
    return static_cast<size_t>(o - buf);
}

} // extern "C"
