/*
 * semver.hpp - a semantic version read once, compared many times
 * (semver.cpp; the rules are in its header).
 *
 * A rule's version is read when the flags file is loaded; a caller's is
 * read at each comparison.  Parts are kept as offsets into the text they
 * were read from, so a parsed version stays valid when the string that
 * holds the text moves (a std::string's short buffer moves with it).
 */
#ifndef FLAGS_SEMVER_HPP
#define FLAGS_SEMVER_HPP

#include <cstddef>
#include <cstdint>

namespace fl {

struct SemverPart {
    uint32_t  at;       /* offset into the text; zero_part: the digit "0" */
    uint32_t  n;        /* bytes; 0 for an absent pre-release */
};

struct Semver {
    SemverPart  num[3];     /* "0" stands in for a missing minor / patch */
    SemverPart  pre;        /* n == 0: a release */
};

constexpr uint32_t zero_part = UINT32_MAX;

/* Whether s[0..len) is a semantic version; *v its parts when it is. */
bool semver_parse(const char *s, size_t len, Semver *v) noexcept;

/* Precedence of a (read from text a) against b (from text b): -1, 0, 1. */
int semver_cmp(const char *a, const Semver &va, const char *b,
    const Semver &vb) noexcept;

} // namespace fl

#endif /* FLAGS_SEMVER_HPP */
