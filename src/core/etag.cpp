/*
 * etag.cpp - the ETag of an answer (GET /flags and OFREP's bulk answer): a
 * hash of everything the answer's bytes depend on (hash.hpp's EtagHasher),
 * the tag's text, and If-None-Match.
 */

#include "flags_core.h"
#include "hash.hpp"
#include "json_writer.hpp"
#include "project.hpp"

#include <cstring>

namespace {

/* the two hex digits of each byte value, made at compile time */
struct HexPairs {
    char c[512];
    constexpr HexPairs() : c()
    {
        for (int i = 0; i < 256; i++) {
            c[2 * i] = fl::hex_digits[i >> 4];
            c[2 * i + 1] = fl::hex_digits[i & 0xf];
        }
    }
};
constexpr HexPairs hex_pairs{};

/* The opaque part of our tags: 16 lowercase hex digits, most significant
 * first, a byte a step. */
void etag_hex(uint64_t etag, char *out)
{
    for (int i = 7; i >= 0; i--) {
        std::memcpy(out + 2 * i, &hex_pairs.c[2 * (etag & 0xff)], 2);
        etag >>= 8;
    }
}

inline bool ows(char c)
{
    return c == ' ' || c == '\t';
}

/* etagc (RFC 9110 8.8.3): %x21 / %x23-7E / obs-text */
inline bool etagc(unsigned char c)
{
    return c == 0x21 || (c >= 0x23 && c != 0x7f);
}

int none_match(const char *s, size_t len, uint64_t etag)
{
    char ours[16];
    etag_hex(etag, ours);

    size_t i = 0, end = len;
    while (i < end && ows(s[i])) {
        i++;
    }
    while (end > i && ows(s[end - 1])) {
        end--;
    }
    if (end - i == 1 && s[i] == '*') {
        return 1;
    }

    bool found = false, any = false;

    while (i < end) {
        /* list elements may be empty: ", ," */
        if (s[i] == ',' || ows(s[i])) {
            i++;
            continue;
        }
        if (end - i >= 2 && s[i] == 'W' && s[i + 1] == '/') {
            i += 2;
        }
        if (i >= end || s[i] != '"') {
            return 0;
        }
        size_t start = ++i;
        while (i < end && s[i] != '"') {
            if (!etagc(static_cast<unsigned char>(s[i]))) {
                return 0;
            }
            i++;
        }
        if (i >= end) {
            return 0;               /* no closing quote */
        }
        if (i - start == 16 && std::memcmp(s + start, ours, 16) == 0) {
            found = true;
        }
        any = true;
        i++;
        while (i < end && ows(s[i])) {
            i++;
        }
        if (i < end && s[i] != ',') {
            return 0;
        }
    }
    return any && found ? 1 : 0;
}

} // namespace


namespace {

/* The part of an answer's ETag that does not depend on the caller. */
template <class Switch>
void answer_flags(fl::EtagHasher &h, const fl_project_t *p,
    const uint32_t *effective_milli, Switch sw_of) noexcept
{
    h.str("answer/1");

    size_t n = p ? p->flags.size() : 0;
    h.u64(n);
    for (size_t i = 0; i < n; i++) {
        const fl::Flag &f = p->flags[i];
        uint64_t eff = effective_milli ? effective_milli[i] : f.rollout_milli;
        uint64_t s = sw_of(i, f);
        /* one mix a flag: the definition hash offset by an odd multiple
         * of (effective, switch), which are at most 17 and 2 bits */
        h.u64(f.def_hash + ((eff << 2 | s) + 1) * UINT64_C(0x9e3779b97f4a7c15));
    }
}

/* The rest: the normalised caller. */
uint64_t answer_caller(fl::EtagHasher &given, const fl_user_t *u) noexcept
{
    /* a copy the compiler can keep in registers */
    fl::EtagHasher h = given;

    /* an empty userId is no userId; the traits are sorted and unique in
     * a fl_user_t */
    if (u != nullptr && u->user_id != nullptr && u->user_id_len != 0) {
        h.u64(1);
        h.str_inline(u->user_id, u->user_id_len);
    } else {
        h.u64(0);
    }
    size_t nt = u != nullptr && u->traits != nullptr ? u->ntraits : 0;
    h.u64(nt);
    for (size_t i = 0; i < nt; i++) {
        const fl_trait_t &t = u->traits[i];
        h.str_inline(t.name, t.name_len);
        h.str_inline(t.value ? t.value : "", t.value ? t.value_len : 0);
    }

    return h.final();
}

/* GET /flags shows values and percentages, not why: a switch counts only
 * where it changes values at the same percentage, an override's
 * percentage on a flag with rules or named users (docs/evaluation.md).
 * Every other answer keeps the ETag it had. */
struct BodySwitch {
    const uint8_t *sw;

    uint8_t operator()(size_t i, const fl::Flag &f) const noexcept
    {
        return sw != nullptr && sw[i] == FL_SWITCH_OVERRIDE_PERCENT
               && (f.has_rules || !f.targets.empty())
               ? uint8_t(FL_SWITCH_OVERRIDE_PERCENT)
               : uint8_t(FL_SWITCH_NONE);
    }
};

struct AnySwitch {
    const uint8_t *sw;

    uint8_t operator()(size_t i, const fl::Flag &) const noexcept
    {
        return sw ? sw[i] : uint8_t(FL_SWITCH_NONE);
    }
};

} // namespace

extern "C" {

uint64_t fl_answer_etag(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw) noexcept
{
    fl::EtagHasher h;
    answer_flags(h, p, effective_milli, AnySwitch{sw});
    return answer_caller(h, u);
}

uint64_t fl_flags_etag(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw) noexcept
{
    fl::EtagHasher h;
    answer_flags(h, p, effective_milli, BodySwitch{sw});
    return answer_caller(h, u);
}

void fl_flags_etag_prefix(const fl_project_t *p,
    const uint32_t *effective_milli, const uint8_t *sw,
    fl_etag_prefix_t *out) noexcept
{
    fl::EtagHasher h;
    answer_flags(h, p, effective_milli, BodySwitch{sw});
    h.mix().save(&out->h, &out->n);
}

uint64_t fl_flags_etag_from(const fl_etag_prefix_t *prefix,
    const fl_user_t *u) noexcept
{
    fl::EtagHasher h;
    h.mix().load(prefix->h, prefix->n);
    return answer_caller(h, u);
}


size_t fl_etag_format(uint64_t etag, char *out) noexcept
{
    out[0] = '"';
    etag_hex(etag, out + 1);
    out[17] = '"';
    return FL_ETAG_LEN;
}

int fl_etag_none_match(const char *value, size_t len, uint64_t etag) noexcept
{
    if (value == nullptr) {
        return 0;
    }
    return none_match(value, len, etag);
}

uint64_t fl_ofrep_bulk_etag(const fl_project_t *p, const fl_user_t *u,
    const uint32_t *effective_milli, const uint8_t *sw,
    const char *stream_path, size_t path_len, const char *token,
    size_t token_len) noexcept
{
    fl::EtagHasher h;

    /* the answer's format, then what varies in its bytes */
    h.str("ofrep-bulk/1");
    h.u64(fl_answer_etag(p, u, effective_milli, sw));
    if (stream_path != nullptr) {
        h.u64(1);
        h.str(stream_path, path_len);
        h.str(token ? token : "", token ? token_len : 0);
    } else {
        h.u64(0);
    }
    return h.final();
}

} // extern "C"
