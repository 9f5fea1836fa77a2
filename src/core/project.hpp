/*
 * project.hpp - the in-memory model of a flags file (internal to the core).
 *
 * A fl_project_t is built once by the loader (project.cpp) at configuration
 * time and is immutable afterwards, with one documented exception: the PCRE2
 * match data used by "regex" rules is scratch memory shared by every
 * evaluation of the project.  nginx workers are single-threaded, so one
 * evaluation of a given project runs at a time; a multi-threaded user would
 * need one project per thread.
 *
 * Everything the request path needs is prepared here so that evaluation
 * never allocates: rule values folded for ignoreCase, "in" lists sorted,
 * numbers parsed, regexes compiled, JSON fragments of the answer built.
 */

#ifndef FLAGS_PROJECT_HPP
#define FLAGS_PROJECT_HPP

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include "flags_core.h"
#include "hash.hpp"
#include "murmur3.hpp"
#include "number.hpp"
#include "semver.hpp"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fl {

/* ------------------------------------------------------------- rules */

enum class Op : uint8_t {
    eq, neq, in, not_in, contains, starts_with, ends_with, regex,
    gt, gte, lt, lte, semver_eq, semver_gt, semver_lt, exists, not_exists
};

struct Pcre2CodeFree {
    void operator()(pcre2_code *c) const noexcept { pcre2_code_free(c); }
};
struct Pcre2MatchDataFree {
    void operator()(pcre2_match_data *m) const noexcept
    { pcre2_match_data_free(m); }
};
struct Pcre2MatchContextFree {
    void operator()(pcre2_match_context *m) const noexcept
    { pcre2_match_context_free(m); }
};

using RegexPtr = std::unique_ptr<pcre2_code, Pcre2CodeFree>;

struct Rule {
    std::string               trait;
    /* "trait": "$userId": the caller's id (the userId parameter, OFREP's
     * targetingKey, flags_context's user=), not a trait of that name */
    bool                      user_id = false;
    Op                        op = Op::eq;
    /* ignoreCase of string operators (eq neq in not_in contains
     * starts_with ends_with) folds ASCII letters only, so the comparison is
     * locale-independent and allocation-free; value / values below are
     * stored already folded.  For regex it is PCRE2_CASELESS. */
    bool                      ignore_case = false;
    std::string               value;     /* string ops, semver, regex source */
    std::vector<std::string>  values;    /* in / not_in: sorted, unique */
    Semver                    semver{};  /* semver_*: value, read once */
    Decimal                   number;    /* gt gte lt lte */
    RegexPtr                  re;        /* regex */
    bool                      jit = false;   /* re compiled by PCRE2's JIT */
    /* the trait's place among the project's trait names (one per distinct
     * name a segment's rule reads, not "$userId"): an evaluation looks
     * each one up once (evaluate.cpp); no_slot for "$userId" */
    uint32_t                  slot = no_slot;

    static constexpr uint32_t no_slot = UINT32_MAX;
};

struct Segment {
    std::string        name;
    std::vector<Rule>  rules;            /* all must match; none: everyone */
};

/* One of a flag's "rules": the first that matches decides with its own
 * percentage (docs/flags-file.md). */
struct TargetingRule {
    std::vector<uint32_t>  segments;     /* indices; empty: everyone */
    uint32_t               rollout_milli = 0;
};

/* A flag's named users ("targets") as loaded: the ids sorted, for the
 * definition hash, and their counts.  The loader moves the ids into the
 * project's NamedIndex and keeps only the counts here. */
struct NamedUsers {
    struct Entry {
        uint32_t  offset;                /* into bytes */
        uint32_t  len;
        bool      on;
    };
    std::string           bytes;         /* every id, back to back */
    std::vector<Entry>    entries;       /* sorted by id */
    uint32_t              on = 0;        /* how many ids are on, off */
    uint32_t              off = 0;

    bool empty() const { return on == 0 && off == 0; }
};

/*
 * Every named user of a project, built when the project is loaded: an
 * open-addressing table from an id to the flags that name it, so an
 * evaluation looks the caller up once, however many flags have named
 * users, and a caller nobody names (the common case) costs one probe.
 * Nothing is scanned per request and nothing is allocated.
 */
struct NamedIndex {
    struct Slot {
        uint32_t  tag;                   /* the hash's high half */
        uint32_t  id;                    /* 1 + index into ids; 0 empty */
    };
    struct Id {
        uint32_t  offset;                /* into bytes */
        uint32_t  len;
        uint32_t  first;                 /* into marks */
        uint32_t  count;
    };
    std::string            bytes;
    std::vector<Id>        ids;
    /* per id, the flags that name it in file order: index << 1 | on */
    std::vector<uint32_t>  marks;
    std::vector<Slot>      slots;        /* a power of two, at most half full */

    const Id *find(const char *id, size_t len, uint64_t hash) const;
};

/* 1 on, 0 off, -1 not named: what the marks of one id (an entry of
 * NamedIndex, nullptr: nobody) say of flag i. */
int named_in(const NamedIndex &x, const NamedIndex::Id *id, size_t i);

/* The hash of a user id that NamedIndex::find() takes. */
uint64_t named_hash(const char *id, size_t len);

struct Flag {
    std::string            name;
    bool                   enabled = false;
    uint32_t               rollout_milli = 0;
    /* Without rules: the segments one of which must match (the flag's
     * one implicit rule).  With rules: every segment the rules name, in
     * order, without repeats (what GET /flags lists); the rules decide. */
    std::vector<uint32_t>  segments;     /* indices into Project::segments */
    bool                   has_rules = false;
    std::vector<TargetingRule> rules;
    NamedUsers             targets;
    std::string            stickiness;   /* empty: userId */
    /*
     * fl_rollback_policy_t as written in the file:
     *  - mode INHERIT: no "rollback" (or "rollback": true): the http-level
     *    flags_rollback policy applies entirely;
     *  - mode OFF: "rollback": false;
     *  - mode ON: a "rollback" object.  A field it does not give
     *    (min_errors, rate_milli, window) stays 0, meaning "take this field
     *    from the http-level policy"; the glue resolves it before calling
     *    fl_state_record_error().
     */
    fl_rollback_policy_t   rollback{};
    /* "ramp" (docs/ramps.md); has_ramp false: none */
    bool                   has_ramp = false;
    fl_ramp_def_t          ramp{};
    uint64_t               def_hash = 0;

    /* The name as a JSON string, quotes included */
    std::string            json_name;
    /* Fixed parts of this flag's object in the /flags answer:
     * {"name":"x","enabled":  ...  ,"segments":[...]} */
    std::string            json_head;
    std::string            json_tail;
    /* json_head + true/false; and the rolloutPercentage member with the
     * configured value followed by json_tail */
    std::string            json_head_on;
    std::string            json_head_off;
    std::string            json_rest;

    /* murmur3 state after "name:", so a bucket hashes only the key */
    Murmur3                bucket_prefix;
};

inline uint64_t named_hash(const char *id, size_t len)
{
    EtagHasher h;
    h.str(id, len);
    return h.final();
}

inline const NamedIndex::Id *NamedIndex::find(const char *id, size_t len,
    uint64_t hash) const
{
    if (slots.empty()) {
        return nullptr;
    }
    size_t mask = slots.size() - 1;
    uint32_t tag = static_cast<uint32_t>(hash >> 32);
    for (size_t i = static_cast<size_t>(hash) & mask; ; i = (i + 1) & mask) {
        const Slot &s = slots[i];
        if (s.id == 0) {
            return nullptr;
        }
        if (s.tag == tag) {
            const Id &e = ids[s.id - 1];
            if (e.len == len
                && std::memcmp(bytes.data() + e.offset, id, len) == 0)
            {
                return &e;
            }
        }
    }
}

inline int named_in(const NamedIndex &x, const NamedIndex::Id *id, size_t i)
{
    if (id == nullptr) {
        return -1;
    }
    /* marks are few (the flags naming one user) and sorted */
    const uint32_t *m = x.marks.data() + id->first;
    size_t lo = 0, hi = id->count;
    uint32_t want = static_cast<uint32_t>(i) << 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((m[mid] & ~1u) < want) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo < id->count && (m[lo] & ~1u) == want) {
        return static_cast<int>(m[lo] & 1u);
    }
    return -1;
}

/* Case folding used by ignoreCase (ASCII only). */
inline unsigned char fold(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? static_cast<unsigned char>(c + 32) : c;
}

/* Whether rule r holds for user u (evaluate.cpp): rule_test() of the
 * trait rule_trait() finds ("$userId" is written into *id). */
bool rule_matches(const fl_project_s &p, const Rule &r, const fl_user_t *u);
const fl_trait_t *rule_trait(const Rule &r, const fl_user_t *u,
    fl_trait_t *id);
bool rule_test(const fl_project_s &p, const Rule &r, const fl_trait_t *t);

} // namespace fl


namespace fl {

/* A flag's prebuilt object, or a piece of the answer's frame, is copied
 * into an answer in one of three fixed sizes, 64, 96 or 128 bytes, which
 * the compiler copies inline (put_flag() and put_word() in evaluate.cpp);
 * longer ones, and the answer's last, by length.  So fl_project_s::json
 * and json_frame end with this many bytes of padding for the reads past
 * their last object or piece; the writes past an object or a piece are
 * overwritten by what comes next, and the last writes none, and the
 * answer's bound (json_bound) holds them (project.cpp, frame_slack). */
constexpr size_t json_copy_slack = 128;

/*
 * What an answer of many flags reads of one flag, apart from Flag in one
 * flat array (fl_project_s::hot, index = the flag's): 48 bytes a flag
 * where Flag spreads the same fields over several cache lines and its
 * strings over the heap.  Built by the loader once the flags stop
 * changing; evaluate.cpp's flag_value() decides a "simple" flag from it
 * alone.
 */
struct FlagHot {
    uint32_t  prefix_h;          /* Flag::bucket_prefix: murmur3's state */
    uint32_t  prefix_tail;       /*   its waiting bytes, little-endian */
    uint32_t  prefix_total;      /*   bytes hashed ("name:") */
    uint32_t  rollout_milli;     /* the configured percentage */
    uint32_t  seg_at;            /* the flag's segments: hot_segs[seg_at..] */
    uint32_t  nsegs;
    uint8_t   prefix_ntail;
    uint8_t   enabled;
    uint8_t   simple;            /* no rules, named users or stickiness */
    uint8_t   seg_bits;          /* 1: seg_mask holds the flag's segments */
    uint64_t  seg_mask;          /* bit s: segment s; only when all of the
                                    flag's segments are among the first 64 */
};

/*
 * The buckets of an answer's simple flags, 8 at a time (lanes.cpp).  The
 * flags are taken in chunks of lane_chunk_flags by index; inside a chunk
 * the simple flags with a percentage strictly between 0 and 100 are
 * grouped by the bytes their "name:" leaves waiting (the alignment
 * KeyMix mixes the caller's id for), each group padded to a multiple of 8
 * lanes.  A lane's fields are in three flat arrays (lane_h, lane_wait,
 * lane_total, from FlagHot's prefix_*); lane_slot[i] is flag i's place
 * among its chunk's buckets, lane_none for a flag outside every group:
 * the slot past the chunk's buckets, where the buffer of an answer's
 * buckets holds 0 (fl::lane_values() reads it for those flags).
 */
constexpr size_t   lane_chunk_flags = 256;
constexpr size_t   lane_chunk_slots = lane_chunk_flags + 4 * 7;
constexpr uint16_t lane_none = lane_chunk_slots;

/* Where GET /flags' object of one flag with one value lies in
 * fl_project_s::json (fl_project_s::json_pick). */
struct JsonPick {
    uint32_t  at;
    uint32_t  len;
};

struct LaneGroup {
    uint32_t  at;          /* lane_h[at .. at + count); a lane's place in
                              its chunk's buckets is its distance from the
                              chunk's first group's at */
    uint16_t  count;       /* a multiple of 8 */
    uint8_t   align;       /* bytes waiting after "name:", 0-3 */
};

} // namespace fl

struct fl_project_s {
    std::vector<fl::Flag>     flags;
    std::vector<fl::FlagHot>  hot;       /* one per flag, same order */
    std::vector<uint32_t>     hot_segs;  /* every flag's segments in a row */
    std::string               json;      /* every flag's object, on, off */
    std::vector<fl::Segment>  segments;

    /* flag name -> index; the views point into flags[i].name, so this is
     * built after flags stops changing. */
    std::unordered_map<std::string_view, size_t>  by_name;

    size_t                    json_bound = 0;

    /* the 8-lane buckets (fl::LaneGroup); lane_chunk[c] .. lane_chunk[c + 1]:
     * chunk c's groups in lane_groups */
    std::vector<uint32_t>       lane_h, lane_wait, lane_total;
    std::vector<fl::LaneGroup>  lane_groups;
    std::vector<uint32_t>       lane_chunk;
    std::vector<uint16_t>       lane_slot;      /* padded to whole words */

    /* The values of a word of 64 flags at once where lanes run
     * (fl::lane_values()), by index, padded to whole words: val_seg[i]
     * flag i's segments as bits when FlagHot::seg_bits, else 0; and a bit
     * a flag in val_fast (simple, its segments, if any, among the first
     * 64: the word's arithmetic decides it) and val_enabled (on in the
     * file); val_gated: the fast flags with segments.  val_segs: every
     * segment some fast flag names.  val_lazy: an answer evaluates those
     * segments only for the flags inside their percentage, after the
     * word's arithmetic, instead of all of them first (fl::answer_lazy();
     * Loader::build_lanes() weighs the two). */
    std::vector<uint64_t>       val_seg;
    std::vector<uint64_t>       val_fast, val_enabled, val_gated;
    uint64_t                    val_segs = 0;
    bool                        val_lazy = false;
    /* each flag's configured percentage (FlagHot::rollout_milli) in a
     * row, padded to whole words: fl::lane_values() tells which flags
     * show it */
    std::vector<uint32_t>       val_rollout;

    /* GET /flags' objects: json_pick[2 * i + v] is where flag i's whole
     * object with value v and its configured percentage lies in json,
     * the one record of it (put_flag() reads it). */
    std::vector<fl::JsonPick>   json_pick;

    /*
     * The same answer where lanes run, from its frame: every flag's object
     * with its configured percentage but without its value, in file order
     * and nothing between them, so that the answer is the frame with a
     * `true` or `false` put in after each flag's "enabled":.  frame_pick[i]
     * is the piece of frame after flag i's value: the rest of its object
     * (Flag::json_rest), then the ',' and the start of the next flag's
     * (Flag::json_head), up to its value; the last flag's piece is the
     * rest of its object alone, and frame_pick[0].at is where the first
     * flag's start ends.  One buffer of about half json's bytes, read
     * front to back by any answer, where json holds each object twice.
     * Each piece is copied json_width bytes at a time (64, 96 or 128; the
     * bytes past a piece are overwritten by the next value and piece);
     * json_long, a bit a flag (whole words), the flags whose piece is
     * over json_width, copied by length instead, as are the pieces of a
     * flag at another percentage and the last piece.  Loader::build_lanes()
     * chooses the width that copies least.
     */
    std::string                 json_frame;
    std::vector<fl::JsonPick>   frame_pick;
    std::vector<uint64_t>       json_long;
    uint32_t                    json_width = 128;

    /* the named users of every flag */
    fl::NamedIndex            named;

    /* Unknown fields met by the loader, for nginx -t: at most
     * FL_MAX_PROJECT_WARNINGS, then one "and N more" line. */
    std::vector<std::string>  warnings;

    /* Scratch memory of regex rules (see the top of this file), allocated
     * at load time so that matching does not allocate. */
    std::unique_ptr<pcre2_match_data, fl::Pcre2MatchDataFree>     match_data;
    std::unique_ptr<pcre2_match_context, fl::Pcre2MatchContextFree> match_ctx;
};

#endif /* FLAGS_PROJECT_HPP */
