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
    Decimal                   number;    /* gt gte lt lte */
    RegexPtr                  re;        /* regex */
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

/*
 * A flag's named users ("targets"), built when the flag is loaded: an
 * open-addressing table of the ids, looked up with the id's hash, which
 * one evaluation computes once for every flag (named_hash()).  Nothing
 * is scanned per request and nothing is allocated.
 */
struct NamedUsers {
    struct Slot {
        uint32_t  tag;                   /* the hash's high half */
        uint32_t  entry;                 /* 1 + index into entries; 0 empty */
    };
    struct Entry {
        uint32_t  offset;                /* into bytes */
        uint32_t  len;
        bool      on;
    };
    std::string           bytes;         /* every id, back to back */
    std::vector<Entry>    entries;
    std::vector<Slot>     slots;         /* a power of two, at most half full */
    uint32_t              on = 0;        /* how many ids are on, off */
    uint32_t              off = 0;

    bool empty() const { return entries.empty(); }
    /* 1 on, 0 off, -1 not named */
    int find(const char *id, size_t len, uint64_t hash) const;
};

/* The hash of a user id that NamedUsers::find() takes. */
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

inline int NamedUsers::find(const char *id, size_t len, uint64_t hash) const
{
    if (slots.empty()) {
        return -1;
    }
    size_t mask = slots.size() - 1;
    uint32_t tag = static_cast<uint32_t>(hash >> 32);
    for (size_t i = static_cast<size_t>(hash) & mask; ; i = (i + 1) & mask) {
        const Slot &s = slots[i];
        if (s.entry == 0) {
            return -1;
        }
        if (s.tag == tag) {
            const Entry &e = entries[s.entry - 1];
            if (e.len == len
                && std::memcmp(bytes.data() + e.offset, id, len) == 0)
            {
                return e.on ? 1 : 0;
            }
        }
    }
}

/* Case folding used by ignoreCase (ASCII only). */
inline unsigned char fold(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? static_cast<unsigned char>(c + 32) : c;
}

/* Whether rule r holds for user u (evaluate.cpp). */
bool rule_matches(const fl_project_s &p, const Rule &r, const fl_user_t *u);

} // namespace fl


struct fl_project_s {
    std::vector<fl::Flag>     flags;
    std::vector<fl::Segment>  segments;

    /* flag name -> index; the views point into flags[i].name, so this is
     * built after flags stops changing. */
    std::unordered_map<std::string_view, size_t>  by_name;

    size_t                    json_bound = 0;

    /* some flag has named users: an evaluation hashes the caller's id */
    bool                      any_targets = false;

    /* Unknown fields met by the loader, for nginx -t: at most
     * FL_MAX_PROJECT_WARNINGS, then one "and N more" line. */
    std::vector<std::string>  warnings;

    /* Scratch memory of regex rules (see the top of this file), allocated
     * at load time so that matching does not allocate. */
    std::unique_ptr<pcre2_match_data, fl::Pcre2MatchDataFree>     match_data;
    std::unique_ptr<pcre2_match_context, fl::Pcre2MatchContextFree> match_ctx;
};

#endif /* FLAGS_PROJECT_HPP */
