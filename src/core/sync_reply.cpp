/*
 * sync_reply.cpp - what a flags_sync round learns from Redis's answer
 * (docs/sync.md), and what applying it does to a flag.
 *
 * hiredis stays the protocol reader (in the glue, which bounds a reply's
 * size while it reads it); the glue hands the reply tree over as a flat
 * view (fl_sync_elt_t, pre-order) and the core reads the script's answer
 * {epoch, ver[, HGETALL ctl]} from it.  Nothing in a reply is trusted:
 * every element's type, every count, every number and every name is
 * checked, an array claiming more elements than the view holds is a
 * malformed reply, and a field that does not fit is skipped.  The work is
 * linear in the view's size.
 *
 * Decisions:
 *  - numbers are what nginx's ngx_atoof() read before this moved here: 1
 *    to 19 digits, at most INT64_MAX, nothing else (an integer reply is
 *    taken as it is, a negative one as its two's complement);
 *  - a record's numbers that are missing or not numbers read as 0, as a
 *    record of an older version lacks the host and the sources;
 *  - a host name is kept only when host= would accept it: no log line
 *    carries what a hostile server wrote;
 *  - a field's <def> is 16 hex digits, either case; anything else is not a
 *    field this host reads;
 *  - a ramp's state from the fleet is taken whole or not at all: every
 *    number must read, its state, stage and cause be ones this host
 *    knows, its log likelihood ratios be finite, and the state hold
 *    together as the script keeps it (ramp_disagrees()): its times in
 *    order, done exactly at the last stage, and rolled back exactly when
 *    the fleet's control holds a rollback record (a done ramp stays done);
 *  - a flag rolled back here that the fleet has not heard of keeps its
 *    rollback when the fleet's ramp is copied: the fleet's stage, rolled
 *    back (the fleet marks it so once the rollback is published);
 *  - a host whose copy knows nothing of the ramp serves no more than the
 *    first stage until the fleet answers (fl_sync_ramp_unknown_milli()).
 */

#include "flags_core.h"
#include "text.hpp"

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr size_t bad = static_cast<size_t>(-1);

/* The index after the element at i and everything nested in it, or `bad`
 * when an array claims more elements than the view holds. */
size_t skip(const fl_sync_elt_t *v, size_t n, size_t i) noexcept
{
    size_t pending = 1;

    while (pending > 0) {
        if (i >= n) {
            return bad;
        }
        pending--;
        if (v[i].type == FL_SYNC_ELT_ARRAY) {
            /* no more than can follow it: pending stays below 2n */
            if (v[i].elements > n - i - 1) {
                return bad;
            }
            pending += v[i].elements;
        }
        i++;
    }

    return i;
}

/* Decimal digits only, at most INT64_MAX (nginx's ngx_atoof()). */
bool decimal(const char *s, size_t len, uint64_t *out) noexcept
{
    const uint64_t max = INT64_MAX;
    uint64_t v = 0;

    if (s == nullptr || len == 0) {
        return false;
    }

    for (size_t i = 0; i < len; i++) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        if (c < '0' || c > '9') {
            return false;
        }
        if (v > (max - (c - '0')) / 10) {
            return false;
        }
        v = v * 10 + (c - '0');
    }

    *out = v;
    return true;
}

/* An integer, or a string of digits (what HGET answers). */
bool number(const fl_sync_elt_t *e, uint64_t *out) noexcept
{
    if (e->type == FL_SYNC_ELT_INTEGER) {
        *out = static_cast<uint64_t>(e->integer);
        return true;
    }

    return e->type == FL_SYNC_ELT_STRING && decimal(e->str, e->len, out);
}

/* Exactly 16 hex digits. */
bool hex16(const char *s, uint64_t *out) noexcept
{
    uint64_t v = 0;

    for (size_t i = 0; i < 16; i++) {
        int d = fl::hex_value(static_cast<unsigned char>(s[i]));
        if (d < 0) {
            return false;
        }
        v = (v << 4) | static_cast<uint64_t>(d);
    }

    *out = v;
    return true;
}

/* The next space-separated word of [*p, last); *p moves past it. */
void word(const char **p, const char *last, const char **w, size_t *len)
    noexcept
{
    const char *sp = static_cast<const char *>(
        std::memchr(*p, ' ', static_cast<size_t>(last - *p)));
    const char *end = sp ? sp : last;

    *w = *p;
    *len = static_cast<size_t>(end - *p);
    *p = sp ? sp + 1 : last;
}

/* A host name the log may show, or left as it was. */
void who(const char *s, size_t len, const char **host, size_t *host_len)
    noexcept
{
    if (fl_sync_host_valid(s, len)) {
        *host = s;
        *host_len = len;
    }
}

/* "at_ms errors enabled", then the host and the sources (newer versions) */
void rollback_record(fl_sync_fleet_t *ft, const char *p, size_t len) noexcept
{
    const char *last = p + len;
    const char *w;
    size_t wlen;
    uint64_t *num[3] = { &ft->at_ms, &ft->errors, &ft->enabled };

    for (size_t k = 0; k < 3; k++) {
        word(&p, last, &w, &wlen);
        if (!decimal(w, wlen, num[k])) {
            *num[k] = 0;
        }
    }

    ft->rolled_back = 1;

    /* the host, then the rest: the fleet's sources */
    bool more = std::memchr(p, ' ', static_cast<size_t>(last - p)) != nullptr;
    word(&p, last, &w, &wlen);
    who(w, wlen, &ft->rb_host, &ft->rb_host_len);

    if (more && !decimal(p, static_cast<size_t>(last - p), &ft->sources)) {
        ft->sources = 0;
    }
}

/* "off" or milli-percent; false for anything else */
bool override_value(fl_sync_fleet_t *ft, const char *p, size_t len) noexcept
{
    uint64_t milli;

    if (len == 3 && std::memcmp(p, "off", 3) == 0) {
        ft->override_kind = FL_OVERRIDE_OFF;
        ft->override_milli = 0;
        return true;
    }

    if (!decimal(p, len, &milli) || milli > FL_MILLI_MAX) {
        return false;
    }

    ft->override_kind = FL_OVERRIDE_PERCENT;
    ft->override_milli = static_cast<uint32_t>(milli);
    return true;
}

/* One field and its value of the control hash: true when used. */
bool control_field(const fl_sync_elt_t *f, const fl_sync_elt_t *v,
    const fl_project_t *p, fl_sync_fleet_t *fleets, size_t nfleets) noexcept
{
    /* "rb:" <16 hex> ":" <flag>, the name at least one byte */
    if (f->type != FL_SYNC_ELT_STRING || v->type != FL_SYNC_ELT_STRING
        || f->str == nullptr || f->len < 3 + 16 + 1 + 1
        || f->str[2] != ':' || f->str[19] != ':'
        || (v->str == nullptr && v->len != 0))
    {
        return false;
    }

    const char *s = f->str;
    char kind = s[0];

    if (!((kind == 'r' && s[1] == 'b') || (kind == 'o' && s[1] == 'v')
          || (kind == 'c' && s[1] == 'b') || (kind == 'o' && s[1] == 'b')))
    {
        return false;
    }

    uint64_t def;
    if (!hex16(s + 3, &def)) {
        return false;
    }

    long idx = fl_project_find_flag(p, s + 20, f->len - 20);
    fl_flag_info_t info;

    if (idx < 0 || static_cast<size_t>(idx) >= nfleets
        || fl_project_flag_info(p, static_cast<size_t>(idx), &info) != 0
        || info.def_hash != def)
    {
        /* another definition's state: not this host's */
        return false;
    }

    fl_sync_fleet_t *ft = &fleets[idx];
    const char *val = v->str ? v->str : "";

    switch (kind) {
    case 'r':
        rollback_record(ft, val, v->len);
        return true;
    case 'c':
        who(val, v->len, &ft->cb_host, &ft->cb_host_len);
        return true;
    default:
        if (s[1] == 'b') {
            who(val, v->len, &ft->ob_host, &ft->ob_host_len);
            return true;
        }
        return override_value(ft, val, v->len);
    }
}

/* ------------------------------------------------ ramps across the fleet */

enum slot_kind { U64, DBL, U32 };

struct slot {
    size_t      off;
    slot_kind   kind;
};

#define RAMP_SLOT(m, k)  { offsetof(fl_ramp_t, m), k }

/* FL_SYNC_RAMP_VALUES, in the script's order (sync_script.cpp) */
const slot ramp_slots[] = {
    RAMP_SLOT(state, U64), RAMP_SLOT(stage, U64), RAMP_SLOT(start_ms, U64),
    RAMP_SLOT(stage_ms, U64), RAMP_SLOT(paused_ms, U64),
    RAMP_SLOT(next_tick_ms, U64), RAMP_SLOT(stage_on, U64),
    RAMP_SLOT(stage_off, U64), RAMP_SLOT(stage_changes, U64),
    RAMP_SLOT(cause, U64), RAMP_SLOT(decided_ms, U64),
    RAMP_SLOT(stalled, U64), RAMP_SLOT(last_n1, U64),
    RAMP_SLOT(last_n0, U64), RAMP_SLOT(last_e1, U64),
    RAMP_SLOT(last_e0, U64),
    RAMP_SLOT(evidence.log_lr[0], DBL), RAMP_SLOT(evidence.log_lr[1], DBL),
    RAMP_SLOT(evidence.log_lr[2], DBL), RAMP_SLOT(evidence.log_lr[3], DBL),
    RAMP_SLOT(evidence.log_lr[4], DBL),
    RAMP_SLOT(evidence.ticks, U64), RAMP_SLOT(evidence.errors_on, U64),
    RAMP_SLOT(evidence.errors_off, U64),
    RAMP_SLOT(evidence.decided_tick, U64),
    RAMP_SLOT(evidence.decided, U32),
    RAMP_SLOT(decided_n1, U64), RAMP_SLOT(decided_n0, U64),
    RAMP_SLOT(decided_e1, U64), RAMP_SLOT(decided_e0, U64),
};

static_assert(sizeof(ramp_slots) / sizeof(ramp_slots[0])
              == FL_SYNC_RAMP_VALUES, "the script's order");

template <typename T>
T *at(fl_ramp_t *r, size_t off) noexcept
{
    return reinterpret_cast<T *>(reinterpret_cast<char *>(r) + off);
}

template <typename T>
const T *at(const fl_ramp_t *r, size_t off) noexcept
{
    return reinterpret_cast<const T *>(
        reinterpret_cast<const char *>(r) + off);
}

/* A finite double written by the script (%.17g). */
bool real(const fl_sync_elt_t *e, double *out) noexcept
{
    char buf[48];

    if (e->type == FL_SYNC_ELT_INTEGER) {
        *out = static_cast<double>(e->integer);
        return true;
    }
    if (e->type != FL_SYNC_ELT_STRING || e->str == nullptr || e->len == 0
        || e->len >= sizeof(buf))
    {
        return false;
    }
    for (size_t i = 0; i < e->len; i++) {
        unsigned char c = static_cast<unsigned char>(e->str[i]);
        if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.'
              || c == 'e' || c == 'E'))
        {
            return false;
        }
    }
    std::memcpy(buf, e->str, e->len);
    buf[e->len] = '\0';
    char *end = nullptr;
    double d = std::strtod(buf, &end);
    if (end != buf + e->len || !std::isfinite(d)) {
        return false;
    }
    *out = d;
    return true;
}

/*
 * What the script never writes (sync_script.cpp keeps these true at the
 * end of every call), so a state that breaks one is not the fleet's: a
 * hand-written or hostile hash.  rolled_back: the fleet's control holds a
 * rollback record of the flag.  nullptr when the state holds together,
 * else why not.
 */
const char *ramp_disagrees(const fl_ramp_def_t *d, const fl_ramp_t *r,
    int rolled_back) noexcept
{
    uint64_t st = r->state;

    if (st == FL_RAMP_PENDING || r->start_ms == 0) {
        /* never started (a ramp rolled back before its start, then
         * cleared, is paused at stage 0 with no start) */
        if (r->stage != 0 || (st == FL_RAMP_PENDING && r->next_tick_ms)) {
            return "never started, yet at a stage or with a tick";
        }
    } else {
        if (r->stage_ms < r->start_ms || r->next_tick_ms <= r->start_ms) {
            return "started, with times out of order";
        }
        if (st != FL_RAMP_DONE && r->stage + 1 == d->nstages) {
            return "at its last stage and not done";
        }
    }
    if (st == FL_RAMP_DONE && r->stage + 1 != d->nstages) {
        return "done before its last stage";
    }

    if (r->cause != FL_RAMP_CAUSE_NONE && r->decided_ms == 0) {
        return "a decision without a time";
    }
    if (st == FL_RAMP_ROLLED_BACK && r->cause == FL_RAMP_CAUSE_NONE) {
        return "rolled back without a cause";
    }
    if (r->evidence.decided
        && (r->evidence.decided_tick == 0
            || r->evidence.decided_tick > r->evidence.ticks))
    {
        return "decided at a tick it has not counted";
    }

    /* the ramp and the control word: one rollback */
    if (rolled_back && st != FL_RAMP_ROLLED_BACK && st != FL_RAMP_DONE) {
        return "not rolled back, though the fleet's control holds a "
               "rollback";
    }
    if (!rolled_back && st == FL_RAMP_ROLLED_BACK) {
        return "rolled back, though the fleet's control holds no rollback";
    }

    return nullptr;
}

/* One entry's item: FL_SYNC_RAMP_VALUES numbers, all of them good, and a
 * state that holds together with the fleet's control. */
bool ramp_item(const fl_sync_elt_t *v, size_t n, size_t i,
    const fl_ramp_def_t *d, int rolled_back, fl_ramp_t *out,
    const char **why) noexcept
{
    *why = "not an array of the ramp's numbers";

    if (v[i].type != FL_SYNC_ELT_ARRAY
        || v[i].elements != FL_SYNC_RAMP_VALUES
        || n - i - 1 < FL_SYNC_RAMP_VALUES)
    {
        return false;
    }

    *why = "a value that is not a number";

    std::memset(out, 0, sizeof(*out));

    for (size_t k = 0; k < FL_SYNC_RAMP_VALUES; k++) {
        const fl_sync_elt_t *e = &v[i + 1 + k];
        const slot &sl = ramp_slots[k];
        uint64_t u;
        double dv;

        switch (sl.kind) {
        case DBL:
            if (!real(e, &dv)) {
                return false;
            }
            *at<double>(out, sl.off) = dv;
            break;
        case U32:
            if (!number(e, &u) || u > 1) {
                return false;
            }
            *at<uint32_t>(out, sl.off) = static_cast<uint32_t>(u);
            break;
        default:
            if (!number(e, &u)) {
                return false;
            }
            *at<uint64_t>(out, sl.off) = u;
            break;
        }
    }

    if (out->state > FL_RAMP_ROLLED_BACK || out->stage >= d->nstages
        || out->cause > FL_RAMP_CAUSE_OTHER)
    {
        *why = "a state, a stage or a cause out of range";
        return false;
    }

    *why = ramp_disagrees(d, out, rolled_back);
    return *why == nullptr;
}

/* The hash's own fields, which say nothing of a flag: epoch, ver and
 * lost (the versions a store that went back lost). */
bool own_field(const fl_sync_elt_t *f) noexcept
{
    return f->type == FL_SYNC_ELT_STRING && f->str != nullptr
           && ((f->len == 5 && std::memcmp(f->str, "epoch", 5) == 0)
               || (f->len == 3 && std::memcmp(f->str, "ver", 3) == 0)
               || (f->len == 4 && std::memcmp(f->str, "lost", 4) == 0));
}

} // namespace


extern "C" int fl_sync_host_valid(const char *name, size_t len) noexcept
{
    if (name == nullptr || len == 0 || len > FL_SYNC_HOST_MAX) {
        return 0;
    }

    for (size_t i = 0; i < len; i++) {
        unsigned char c = static_cast<unsigned char>(name[i]);
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9')
              || c == '.' || c == '-' || c == '_' || c == ':'))
        {
            return 0;
        }
    }

    return 1;
}


extern "C" fl_sync_reply_status_t fl_sync_reply_head(
    const fl_sync_elt_t *view, size_t n, uint64_t known_epoch,
    fl_sync_head_t *out) noexcept
{
    std::memset(out, 0, sizeof(*out));

    if (view == nullptr || n == 0 || skip(view, n, 0) != n) {
        return FL_SYNC_REPLY_MALFORMED;
    }

    if (view[0].type != FL_SYNC_ELT_ARRAY) {
        return FL_SYNC_REPLY_NOT_ARRAY;
    }

    if (view[0].elements < 2) {
        return FL_SYNC_REPLY_SHORT;
    }

    /* the view is whole: every skip below stays within it */
    size_t i = 1;

    if (!number(&view[i], &out->epoch)) {
        return FL_SYNC_REPLY_EPOCH;
    }

    i = skip(view, n, i);

    if (!number(&view[i], &out->ver)) {
        out->epoch = 0;
        return FL_SYNC_REPLY_VERSION;
    }

    if (view[0].elements < 3) {
        return FL_SYNC_REPLY_OK;
    }

    i = skip(view, n, i);

    if (view[i].type == FL_SYNC_ELT_INTEGER && view[i].integer == 0) {
        /* no control hash: the ramps follow */

    } else if (view[i].type != FL_SYNC_ELT_ARRAY || (view[i].elements & 1)) {
        return FL_SYNC_REPLY_CONTROL;

    } else {
        out->has_control = 1;
        out->control = i;
        out->new_epoch = known_epoch != 0 && known_epoch != out->epoch;
    }

    if (view[0].elements >= 4) {
        i = skip(view, n, i);

        if (view[i].type == FL_SYNC_ELT_ARRAY) {
            out->has_ramps = 1;
            out->ramps = i;
        }
    }

    if (view[0].elements >= 5) {
        /* what the store lost (docs/sync.md, "What a failover loses"):
         * bits, anything else is no news */
        uint64_t bits;

        i = skip(view, n, i);

        if (number(&view[i], &bits) && bits <= 3) {
            out->went_back = (bits & 1) && out->has_control
                             && !out->new_epoch;
            out->resend = (bits & 2) != 0;
        }
    }

    return FL_SYNC_REPLY_OK;
}


extern "C" const char *fl_sync_reply_status_text(fl_sync_reply_status_t st)
    noexcept
{
    switch (st) {
    case FL_SYNC_REPLY_OK:
        return "";
    case FL_SYNC_REPLY_MALFORMED:
        return "not one whole reply";
    case FL_SYNC_REPLY_NOT_ARRAY:
        return "the reply is not an array";
    case FL_SYNC_REPLY_SHORT:
        return "fewer than 2 elements";
    case FL_SYNC_REPLY_EPOCH:
        return "the epoch is not a number";
    case FL_SYNC_REPLY_VERSION:
        return "the version is not a number";
    case FL_SYNC_REPLY_CONTROL:
        return "the control hash is not an array of pairs";
    }
    return "unknown status";
}


extern "C" size_t fl_sync_reply_controls(const fl_sync_elt_t *view,
    size_t n, const fl_sync_head_t *head, const fl_project_t *p,
    fl_sync_fleet_t *fleets, size_t nfleets, size_t *ignored) noexcept
{
    size_t used = 0, skipped = 0;

    if (fleets && nfleets) {
        std::memset(fleets, 0, nfleets * sizeof(fl_sync_fleet_t));
    }

    if (ignored) {
        *ignored = 0;
    }

    if (view == nullptr || head == nullptr || p == nullptr
        || fleets == nullptr || !head->has_control || head->control >= n
        || view[head->control].type != FL_SYNC_ELT_ARRAY)
    {
        return 0;
    }

    size_t pairs = view[head->control].elements / 2;
    size_t i = head->control + 1;

    for (size_t j = 0; j < pairs; j++) {
        size_t v = skip(view, n, i);
        size_t next = (v == bad) ? bad : skip(view, n, v);

        if (next == bad) {
            /* a view that is not whole: the rest is not read */
            skipped += pairs - j;
            break;
        }

        if (control_field(&view[i], &view[v], p, fleets, nfleets)) {
            used++;
        } else if (!own_field(&view[i])) {
            skipped++;
        }

        i = next;
    }

    if (ignored) {
        *ignored = skipped;
    }

    return used;
}


extern "C" int fl_sync_action(const fl_sync_fleet_t *fleet, uint64_t sent,
    uint64_t now, fl_sync_action_t *out) noexcept
{
    std::memset(out, 0, sizeof(*out));

    /* a change here since the round began wins: it goes next round */
    if (sent != now) {
        return 0;
    }

    uint64_t said = fl_sync_control(fleet->rolled_back,
                                    fleet->override_kind,
                                    fleet->override_milli);

    out->rollback = fleet->rolled_back && !(now & 1);
    out->clear = !fleet->rolled_back && (now & 1);

    if ((said >> 1) != (now >> 1)) {
        out->set_override = 1;
        out->override_kind = fleet->override_kind;
        out->override_milli = fleet->override_kind == FL_OVERRIDE_PERCENT
                              ? fleet->override_milli : 0;
    }

    out->known = said;

    return 1;
}


extern "C" uint64_t fl_sync_known_unmoved(const fl_sync_flag_t *f) noexcept
{
    return f->entry == FL_SYNC_NO_ENTRY ? f->known : f->control;
}


extern "C" uint64_t fl_sync_back_known(const fl_sync_fleet_t *fleet)
    noexcept
{
    /* the store's view, whatever this host holds: where they differ, the
     * next round publishes this host's (a lost rollback "set", a lost
     * clear "clr", a lost override) */
    return fl_sync_control(fleet->rolled_back, fleet->override_kind,
                           fleet->override_kind == FL_OVERRIDE_PERCENT
                           ? fleet->override_milli : 0);
}


extern "C" size_t fl_sync_ramp_seed(const fl_ramp_t *r, char *buf) noexcept
{
    char *o = buf;

    for (size_t k = 0; k < FL_SYNC_RAMP_VALUES; k++) {
        const slot &sl = ramp_slots[k];
        int len;

        if (k) {
            *o++ = ' ';
        }
        switch (sl.kind) {
        case DBL: {
            double d = *at<double>(r, sl.off);
            len = std::snprintf(o, 25, "%.17g", std::isfinite(d) ? d : 0.0);
            break;
        }
        case U32:
            len = std::snprintf(o, 25, "%u",
                                static_cast<unsigned>(
                                    *at<uint32_t>(r, sl.off) != 0));
            break;
        default:
            len = std::snprintf(o, 25, "%llu",
                                static_cast<unsigned long long>(
                                    *at<uint64_t>(r, sl.off)));
            break;
        }
        o += len > 0 && len < 25 ? len : 0;
    }

    return static_cast<size_t>(o - buf);
}


extern "C" size_t fl_sync_reply_ramps(const fl_sync_elt_t *view, size_t n,
    const fl_sync_head_t *head, const fl_sync_flag_t *flags, size_t nflags,
    const fl_sync_fleet_t *fleets, fl_sync_ramp_t *out, size_t *ignored)
    noexcept
{
    size_t used = 0, skipped = 0;

    if (out && nflags) {
        std::memset(out, 0, nflags * sizeof(fl_sync_ramp_t));
    }
    if (ignored) {
        *ignored = 0;
    }

    if (view == nullptr || head == nullptr || flags == nullptr
        || out == nullptr || !head->has_ramps || head->ramps >= n
        || view[head->ramps].type != FL_SYNC_ELT_ARRAY)
    {
        return 0;
    }

    size_t items = view[head->ramps].elements;
    size_t i = head->ramps + 1;
    size_t f = 0;

    for (size_t j = 0; j < items; j++) {
        size_t next = skip(view, n, i);

        if (next == bad) {
            skipped += items - j;
            break;
        }

        /* the j-th entry of the round */
        while (f < nflags && flags[f].entry == FL_SYNC_NO_ENTRY) {
            f++;
        }
        if (f == nflags) {
            skipped += items - j;
            break;
        }

        /* the fleet's rollback: this answer's control hash, else what
         * the fleet last said (its version did not move since) */
        int rolled = fleets != nullptr ? fleets[f].rolled_back != 0
                                       : (flags[f].known & 1) != 0;
        const char *why = nullptr;

        if (flags[f].ramp_def != nullptr
            && ramp_item(view, n, i, flags[f].ramp_def, rolled,
                         &out[f].state, &why))
        {
            out[f].present = 1;
            used++;
        } else if (flags[f].ramp_def != nullptr
                   || view[i].type == FL_SYNC_ELT_ARRAY)
        {
            std::memset(&out[f].state, 0, sizeof(fl_ramp_t));
            out[f].refused = flags[f].ramp_def != nullptr ? why
                             : "an entry without a ramp";
            skipped++;
        }

        f++;
        i = next;
    }

    if (ignored) {
        *ignored = skipped;
    }

    return used;
}


extern "C" fl_ramp_event_t fl_sync_ramp_copy(const fl_ramp_def_t *d,
    fl_ramp_t *r, const fl_ramp_t *fleet, int rolled_here,
    uint64_t rolled_at_ms) noexcept
{
    fl_ramp_t old, mine;

    (void) d;

    fl_ramp_read(r, &old);

    if (rolled_here && fleet->state != FL_RAMP_ROLLED_BACK
        && fleet->state != FL_RAMP_DONE)
    {
        /* rolled back here, and the fleet has not heard of it yet (the
         * next round publishes it): the fleet's stage is taken, the
         * rollback stays, as the fleet will mark it (rmark()) */
        std::memcpy(&mine, fleet, sizeof(mine));
        mine.state = FL_RAMP_ROLLED_BACK;
        if (mine.cause == FL_RAMP_CAUSE_NONE) {
            mine.cause = FL_RAMP_CAUSE_OTHER;
            mine.decided_ms = rolled_at_ms;
        }
        fleet = &mine;
    }

    for (size_t k = 0; k < FL_SYNC_RAMP_VALUES; k++) {
        const slot &sl = ramp_slots[k];

        if (sl.kind == U32) {
            __atomic_store_n(at<uint32_t>(r, sl.off),
                             *at<uint32_t>(fleet, sl.off), __ATOMIC_RELAXED);
        } else {
            /* a double travels as the word it is */
            uint64_t w;
            std::memcpy(&w, at<uint64_t>(fleet, sl.off), sizeof(w));
            __atomic_store_n(at<uint64_t>(r, sl.off), w, __ATOMIC_RELAXED);
        }
    }

    if (fleet->state == FL_RAMP_PENDING) {
        return FL_RAMP_EV_NONE;
    }
    if (old.state == FL_RAMP_PENDING || old.start_ms != fleet->start_ms) {
        return fleet->state == FL_RAMP_DONE ? FL_RAMP_EV_DONE
                                            : FL_RAMP_EV_STARTED;
    }
    if (old.stage != fleet->stage) {
        return fleet->state == FL_RAMP_DONE ? FL_RAMP_EV_DONE
                                            : FL_RAMP_EV_ADVANCED;
    }
    if (fleet->stalled && !old.stalled) {
        return FL_RAMP_EV_STALLED;
    }
    return FL_RAMP_EV_NONE;
}


extern "C" uint32_t fl_sync_ramp_unknown_milli(const fl_ramp_def_t *d,
    uint32_t configured_milli) noexcept
{
    if (d == nullptr || d->nstages == 0
        || configured_milli <= d->stages[0].milli)
    {
        return FL_RAMP_NONE;
    }

    return d->stages[0].milli;
}
