/*
 * fuzz_sync_reply.cc - a Redis answer to a flags_sync round, as hostile as
 * the bytes make it (docs/sync.md; src/core/sync_reply.cpp).
 *
 * The input is decoded into the flat view the glue hands the core, one
 * element a line, RESP-like so that seeds and the dictionary stay
 * readable:
 *
 *   *N      an array claiming N elements (any 64-bit value, "-1" included:
 *           counts that lie are part of the game)
 *   :N      an integer (wraps at 64 bits)
 *   $text   a string: the rest of the line, any bytes but '\n'
 *   other   an element the round never reads (nil, status, error)
 *
 * Each string is a heap copy of its exact size, so a read past it is
 * caught.  Then the head and the control hash are read for a small
 * project, every fleet record is applied with fl_sync_action() against
 * controls derived from the input, and the records drive a round's
 * encoding (plan, bound, args).  Checked: statuses in range, the control
 * hash index inside the view, host names that point into the view's
 * strings and that host= accepts, overrides in range, actions consistent
 * with the encoding, a round's arguments inside the core's bound.
 */

#include "fuzz_view.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace {

const char project_json[] =
    "{\"flags\":["
    "{\"name\":\"risky\",\"enabled\":true,\"rolloutPercentage\":100,"
    " \"rollback\":{\"minErrors\":5,\"rate\":10,\"window\":60}},"
    "{\"name\":\"calm\",\"enabled\":true,\"rolloutPercentage\":50},"
    "{\"name\":\"a:b.c-d\",\"enabled\":false,\"rolloutPercentage\":0}"
    "]}";

fl_project_t *project()
{
    static fl_project_t *p = [] {
        fl_project_t *q = nullptr;
        char err[256];
        if (fl_project_load_buffer(project_json, sizeof(project_json) - 1,
                                   "fuzz.json", &q, err, sizeof(err))
            != FL_OK)
        {
            std::fprintf(stderr, "fuzz project: %s\n", err);
            std::abort();
        }
        return q;
    }();
    return p;
}

void check_host(const View &v, const char *host, size_t len, const char *what)
{
    if (host == nullptr) {
        FUZZ_CHECK(len == 0, "%s: no host with a length %zu", what, len);
        return;
    }
    FUZZ_CHECK(fl_sync_host_valid(host, len), "%s: a host host= refuses",
               what);
    FUZZ_CHECK(v.holds(host, len), "%s: a host outside the reply", what);
}

void check_fleet(const View &v, const fl_sync_fleet_t &f)
{
    FUZZ_CHECK(f.override_kind == FL_OVERRIDE_NONE
               || f.override_kind == FL_OVERRIDE_OFF
               || f.override_kind == FL_OVERRIDE_PERCENT,
               "override kind %d", static_cast<int>(f.override_kind));
    FUZZ_CHECK(f.override_milli <= FL_MILLI_MAX
               && (f.override_kind == FL_OVERRIDE_PERCENT
                   || f.override_milli == 0),
               "override %d milli %u", static_cast<int>(f.override_kind),
               f.override_milli);
    FUZZ_CHECK(f.at_ms <= INT64_MAX && f.errors <= INT64_MAX
               && f.enabled <= INT64_MAX && f.sources <= INT64_MAX,
               "a record's number past what a reply can say");
    FUZZ_CHECK(f.rolled_back || (f.at_ms == 0 && f.errors == 0
                                 && f.enabled == 0 && f.sources == 0
                                 && f.rb_host == nullptr),
               "a record without an rb: field");
    check_host(v, f.rb_host, f.rb_host_len, "rb");
    check_host(v, f.cb_host, f.cb_host_len, "cb");
    check_host(v, f.ob_host, f.ob_host_len, "ob");
}

/* The fleet's answer applied against a control derived from the input. */
uint64_t check_action(const fl_sync_fleet_t &f, uint64_t h)
{
    static const uint64_t controls[] = {
        0, 1, 2, 3, 4 | (25000ull << 8), 5 | (100000ull << 8),
    };
    uint64_t now = controls[h % 6];
    uint64_t sent = (h & 0x100) ? controls[(h >> 3) % 6] : now;
    fl_sync_action_t a;

    int rc = fl_sync_action(&f, sent, now, &a);
    if (sent != now) {
        FUZZ_CHECK(rc == 0 && !a.rollback && !a.clear && !a.set_override,
                   "an action on a flag changed during the round");
        return now;
    }
    FUZZ_CHECK(rc == 1, "no action on an unchanged flag");
    FUZZ_CHECK(!(a.rollback && a.clear), "rollback and clear at once");
    FUZZ_CHECK(a.known == fl_sync_control(f.rolled_back, f.override_kind,
                                          f.override_milli),
               "known %llu is not the fleet's",
               static_cast<unsigned long long>(a.known));
    FUZZ_CHECK(a.rollback == (f.rolled_back && !(now & 1))
               && a.clear == (!f.rolled_back && (now & 1)),
               "rollback %d clear %d for fleet %d here %d", a.rollback,
               a.clear, f.rolled_back, static_cast<int>(now & 1));
    FUZZ_CHECK(a.set_override == ((a.known >> 1) != (now >> 1)),
               "set_override %d", a.set_override);
    return a.known;
}

/* A ramp's definition of any numbers (nstages 1 .. FL_RAMP_MAX_STAGES). */
const fl_ramp_def_t *ramp_def(uint64_t h)
{
    static fl_ramp_def_t d;

    std::memset(&d, 0, sizeof(d));
    d.nstages = 1 + static_cast<uint32_t>(h % FL_RAMP_MAX_STAGES);
    for (uint32_t k = 0; k < FL_RAMP_MAX_STAGES; k++) {
        d.stages[k].milli = static_cast<uint32_t>(fuzz::mix64(h + k));
        d.stages[k].hold = static_cast<uint32_t>(fuzz::mix64(h - k));
        d.stages[k].min_requests = static_cast<uint32_t>(fuzz::mix64(h ^ k));
    }
    d.start_at_ms = fuzz::mix64(h + 100);
    d.max_extend = static_cast<uint32_t>(h >> 7);
    d.on_insufficient = static_cast<uint32_t>(h >> 13);
    d.alpha_ppm = static_cast<uint32_t>(h >> 19);
    d.dispersion_milli = static_cast<uint32_t>(h >> 29);
    d.tick = static_cast<uint32_t>(h >> 37);
    return &d;
}

/* A ramp's state of any words, doubles included (NaN, infinities). */
const fl_ramp_t *seed(uint64_t h)
{
    static fl_ramp_t r;
    uint64_t *w = reinterpret_cast<uint64_t *>(&r);

    for (size_t k = 0; k < sizeof(r) / sizeof(uint64_t); k++) {
        w[k] = fuzz::mix64(h + k);
    }
    return &r;
}

/* The reply's ramps read for the round's flags, and copied into a state:
 * only what reads whole, and never out of range. */
void check_ramps(const View &v, const fl_sync_flag_t *f, size_t n)
{
    const fl_sync_elt_t *view = v.elts.empty() ? nullptr : v.elts.data();
    fl_sync_head_t head;
    fl_sync_ramp_t out[3];
    size_t ignored = 0;

    if (fl_sync_reply_head(view, v.elts.size(), 0, &head)
        != FL_SYNC_REPLY_OK)
    {
        return;
    }

    size_t used = fl_sync_reply_ramps(view, v.elts.size(), &head, f, n,
                                      nullptr, out, &ignored);

    if (!head.has_ramps) {
        FUZZ_CHECK(used == 0 && ignored == 0, "ramps read without ramps");
        return;
    }

    FUZZ_CHECK(used + ignored <= view[head.ramps].elements,
               "%zu used and %zu ignored of %zu items", used, ignored,
               view[head.ramps].elements);

    size_t present = 0;
    for (size_t i = 0; i < n; i++) {
        if (!out[i].present) {
            continue;
        }
        present++;
        FUZZ_CHECK(f[i].ramp_def != nullptr && f[i].entry != FL_SYNC_NO_ENTRY,
                   "a ramp for flag %zu, which sent none", i);
        FUZZ_CHECK(out[i].state.state <= FL_RAMP_ROLLED_BACK
                   && out[i].state.stage < f[i].ramp_def->nstages
                   && out[i].state.cause <= FL_RAMP_CAUSE_OTHER,
                   "ramp %zu out of range", i);
        for (int k = 0; k < FL_REGRESSION_GRID; k++) {
            FUZZ_CHECK(std::isfinite(out[i].state.evidence.log_lr[k]),
                       "ramp %zu: log_lr %d", i, k);
        }

        fl_ramp_t r;
        fl_ramp_init(&r);
        fl_ramp_event_t ev = fl_sync_ramp_copy(f[i].ramp_def, &r,
                                               &out[i].state, 0, 0);
        FUZZ_CHECK(ev >= FL_RAMP_EV_NONE && ev <= FL_RAMP_EV_STALLED,
                   "copy event %d", static_cast<int>(ev));
        FUZZ_CHECK(std::memcmp(&r, &out[i].state, sizeof(r)) == 0,
                   "ramp %zu copied whole", i);
        /* flags_status writes what was copied */
        char json[FL_RAMP_JSON_BOUND];
        size_t len = fl_ramp_status_json(f[i].ramp_def, &r, 0, 0, json);
        FUZZ_CHECK(len > 0 && len <= sizeof(json), "status of %zu", len);
    }
    FUZZ_CHECK(present == used, "%zu present, %zu used", present, used);
}

/* The records as a round's flags: the encoding holds any numbers. */
void check_round(const fl_sync_fleet_t *fleets, const uint64_t *known,
    size_t n, uint64_t h, const View &v)
{
    fl_sync_flag_t f[3];
    uint32_t keys[FL_SOURCE_SLOTS], ages[FL_SOURCE_SLOTS];
    fl_sync_round_t r;

    std::memset(&r, 0, sizeof(r));
    r.prefix = "flags:";
    r.prefix_len = 6;
    r.project = "shop";
    r.project_len = 4;
    r.host = fleets[0].rb_host ? fleets[0].rb_host : "h0";
    r.host_len = fleets[0].rb_host ? fleets[0].rb_host_len : 2;
    r.epoch = h & 1 ? 0 : fleets[0].at_ms;
    r.ver = fleets[1].errors;
    r.incarnation = h;
    r.calls = fleets[2].errors;
    r.resend = (h >> 7) & 1;

    for (size_t k = 0; k < FL_SOURCE_SLOTS; k++) {
        keys[k] = static_cast<uint32_t>(fuzz::mix64(h + k));
        ages[k] = static_cast<uint32_t>(fuzz::mix64(h - k));
    }

    for (size_t i = 0; i < n; i++) {
        fl_flag_info_t info;
        FUZZ_CHECK(fl_project_flag_info(project(), i, &info) == 0, "info");
        std::memset(&f[i], 0, sizeof(f[i]));
        f[i].name = info.name;
        f[i].name_len = info.name_len;
        f[i].def_hash = info.def_hash;
        f[i].counted = (h >> (8 + i)) & 1;
        f[i].policy.mode = (h >> (12 + i)) & 1 ? FL_ROLLBACK_ON
                                               : FL_ROLLBACK_OFF;
        f[i].policy.min_errors = static_cast<uint32_t>(fleets[i].errors);
        f[i].policy.rate_milli = fleets[i].override_milli;
        f[i].policy.window = static_cast<uint32_t>(fleets[i].enabled);
        f[i].policy.min_sources = static_cast<uint32_t>(fleets[i].sources);
        f[i].control = known[i] ^ ((h >> (16 + i)) & 1);
        f[i].known = known[i];
        f[i].rb_at_ms = fleets[i].at_ms;
        f[i].rb_errors = fleets[i].errors;
        f[i].rb_enabled = fleets[i].enabled;
        f[i].rb_sources = fleets[i].sources;
        f[i].errors = fleets[i].at_ms;
        f[i].base_errors = fleets[(i + 1) % n].at_ms;
        f[i].enabled = fleets[i].enabled;
        f[i].base_enabled = fleets[i].errors;
        f[i].acked_errors = fleets[i].sources;
        f[i].acked_enabled = fleets[(i + 2) % n].at_ms;
        f[i].source_keys = keys;
        f[i].source_ages = ages;
        f[i].nsources = static_cast<size_t>(fleets[i].sources);
        if ((h >> (20 + i)) & 1) {
            /* a ramped flag: any numbers, any actions, a seed or none */
            f[i].ramp_def = ramp_def(h + i);
            f[i].on = fleets[i].at_ms;
            f[i].base_on = fleets[i].errors;
            f[i].off_errors = fleets[i].enabled;
            f[i].ramp_actions = fuzz::mix64(h ^ i);
            f[i].ramp_seed = (h >> (24 + i)) & 1 ? seed(h - i) : nullptr;
        }
    }

    size_t sources = 0;
    size_t entries = fl_sync_round_plan(&r, f, n, &sources);
    FUZZ_CHECK(entries <= n && sources <= entries, "plan %zu/%zu of %zu",
               sources, entries, n);

    size_t bound = fl_sync_round_bound(&r, f, n);
    char *buf = static_cast<char *>(std::malloc(bound));
    FUZZ_CHECK(buf != nullptr, "malloc");
    const char *argv[FL_SYNC_ROUND_ARGC(3)];
    size_t argvlen[FL_SYNC_ROUND_ARGC(3)], nkeys = 0;

    size_t argc = fl_sync_round_args(&r, f, n, buf, bound, argv, argvlen,
                                     FL_SYNC_ROUND_ARGC(3), &nkeys);
    FUZZ_CHECK(argc == FL_SYNC_ROUND_ARGC(entries),
               "argc %zu for %zu entries (bound %zu)", argc, entries, bound);
    FUZZ_CHECK(nkeys == 2 + FL_SYNC_ENTRY_KEYS * entries, "nkeys %zu",
               nkeys);

    size_t used = 0;
    for (size_t i = 0; i < argc; i++) {
        if (argv[i] >= buf && argv[i] < buf + bound) {
            FUZZ_CHECK(argv[i] + argvlen[i] <= buf + bound,
                       "argument %zu past the bound", i);
            used += argvlen[i];
        } else if (argvlen[i]) {
            /* a name, the host, or a constant op */
            bool name = false;
            for (size_t j = 0; j < n; j++) {
                name = name || argv[i] == f[j].name;
            }
            FUZZ_CHECK(name || argv[i] == r.host || argvlen[i] <= 3
                       || v.holds(argv[i], argvlen[i]),
                       "argument %zu points nowhere known", i);
        }
    }
    FUZZ_CHECK(used <= bound, "%zu bytes written, bound %zu", used, bound);
    std::free(buf);

    check_ramps(v, f, n);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    View v;
    decode(data, size, &v);

    uint64_t h = fuzz::mix64(fuzz::hash64(data, size));
    uint64_t known_epoch = (h & 3) == 0 ? 0 : (h & 3) == 1 ? 1 : h;

    const fl_sync_elt_t *view = v.elts.empty() ? nullptr : v.elts.data();
    size_t n = v.elts.size();
    fl_sync_head_t head;

    fl_sync_reply_status_t st = fl_sync_reply_head(view, n, known_epoch,
                                                   &head);
    FUZZ_CHECK(st >= FL_SYNC_REPLY_OK && st <= FL_SYNC_REPLY_CONTROL,
               "status %d", static_cast<int>(st));
    FUZZ_CHECK((st == FL_SYNC_REPLY_OK) == (fl_sync_reply_status_text(st)[0]
                                           == '\0'),
               "status %d and its words", static_cast<int>(st));
    FUZZ_CHECK(!head.has_control || st == FL_SYNC_REPLY_OK,
               "a control hash with status %d", static_cast<int>(st));
    FUZZ_CHECK(!head.went_back || (head.has_control && !head.new_epoch
                                   && st == FL_SYNC_REPLY_OK),
               "went back without the store's view");

    if (head.has_control) {
        FUZZ_CHECK(head.control < n
                   && view[head.control].type == FL_SYNC_ELT_ARRAY
                   && (view[head.control].elements & 1) == 0,
                   "control hash index %zu of %zu", head.control, n);
        FUZZ_CHECK(head.new_epoch == (known_epoch != 0
                                      && known_epoch != head.epoch),
                   "new_epoch %d", head.new_epoch);
    }

    fl_sync_fleet_t fleets[3];
    size_t ignored = 0;
    size_t used = fl_sync_reply_controls(view, n, &head, project(), fleets,
                                         3, &ignored);

    if (!head.has_control) {
        FUZZ_CHECK(used == 0 && ignored == 0, "fields read without a hash");
    } else {
        FUZZ_CHECK(used + ignored <= view[head.control].elements / 2,
                   "%zu used and %zu ignored of %zu pairs", used, ignored,
                   view[head.control].elements / 2);
    }

    uint64_t known[3];
    for (size_t i = 0; i < 3; i++) {
        check_fleet(v, fleets[i]);
        known[i] = check_action(fleets[i], fuzz::mix64(h + i));
    }

    check_round(fleets, known, 3, h, v);
    return 0;
}
