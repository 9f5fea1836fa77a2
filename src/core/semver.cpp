/*
 * semver.cpp - semantic version precedence (semver.org 2.0.0; a leading
 * v and short forms as in docs/evaluation.md).
 *
 * Accepted: [v]MAJOR[.MINOR[.PATCH]][-PRE][+BUILD] where the numbers are
 * digits without leading zeros ("0" itself is fine), PRE and BUILD are
 * dot-separated non-empty identifiers of [0-9A-Za-z-], and numeric PRE
 * identifiers have no leading zeros.  "1" and "1.2" read as 1.0.0 and
 * 1.2.0 (a pre-release is allowed after the short forms too: "1.2-rc.1").
 * Only a lowercase "v" is accepted as prefix.  Build metadata is checked
 * for syntax, then ignored.
 *
 * Numbers are compared as digit strings (length first, then bytes), so
 * there is no overflow and no limit on their size.  Nothing allocates.
 */

#include "flags_core.h"
#include "semver.hpp"

#include <cstring>

namespace {

struct Span {
    const char *p = nullptr;
    size_t      n = 0;
};

using fl::Semver;
using fl::SemverPart;

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

inline bool is_ident_char(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || c == '-';
}

/* Digits without a leading zero; advances *i. */
bool parse_numeric(const char *s, size_t len, size_t *i, Span *out)
{
    size_t start = *i;

    while (*i < len && is_digit(s[*i])) {
        (*i)++;
    }
    size_t n = *i - start;
    if (n == 0 || (n > 1 && s[start] == '0')) {
        return false;
    }
    out->p = s + start;
    out->n = n;
    return true;
}

/* Dot-separated identifiers up to '+' or the end; advances *i. */
bool parse_idents(const char *s, size_t len, size_t *i, bool check_numeric,
    Span *out)
{
    size_t start = *i;

    for (;;) {
        size_t id = *i;
        bool all_digits = true;

        while (*i < len && is_ident_char(s[*i])) {
            all_digits = all_digits && is_digit(s[*i]);
            (*i)++;
        }
        size_t n = *i - id;
        if (n == 0) {
            return false;
        }
        if (check_numeric && all_digits && n > 1 && s[id] == '0') {
            return false;
        }
        if (*i < len && s[*i] == '.') {
            (*i)++;
            continue;
        }
        break;
    }

    out->p = s + start;
    out->n = *i - start;
    return true;
}

SemverPart part(const char *s, Span sp)
{
    return SemverPart{static_cast<uint32_t>(sp.p - s),
                      static_cast<uint32_t>(sp.n)};
}

bool parse(const char *s, size_t len, Semver *v)
{
    size_t i = 0;

    /* offsets are 32 bits; no version is nearly that long */
    if (s == nullptr || len >= fl::zero_part) {
        return false;
    }
    if (len > 0 && s[0] == 'v') {
        i = 1;
    }

    for (int k = 0; k < 3; k++) {
        if (k > 0) {
            if (i >= len || s[i] != '.') {
                v->num[k] = SemverPart{fl::zero_part, 1};
                continue;
            }
            i++;
        }
        Span num;
        if (!parse_numeric(s, len, &i, &num)) {
            return false;
        }
        v->num[k] = part(s, num);
    }

    v->pre = SemverPart{0, 0};
    if (i < len && s[i] == '-') {
        Span pre;
        i++;
        if (!parse_idents(s, len, &i, true, &pre)) {
            return false;
        }
        v->pre = part(s, pre);
    }

    if (i < len && s[i] == '+') {
        Span build;
        i++;
        if (!parse_idents(s, len, &i, false, &build)) {
            return false;
        }
    }

    return i == len;
}

/* A part's bytes in the text it was read from. */
Span span(const char *s, SemverPart p)
{
    static const char zero = '0';
    return p.at == fl::zero_part ? Span{&zero, 1} : Span{s + p.at, p.n};
}

int cmp_numeric(const char *a, size_t an, const char *b, size_t bn)
{
    if (an != bn) {
        return an < bn ? -1 : 1;
    }
    int c = std::memcmp(a, b, an);
    return (c > 0) - (c < 0);
}

bool all_digits(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!is_digit(p[i])) {
            return false;
        }
    }
    return true;
}

/* semver.org rule 11: identifiers left to right; numeric ones compare
 * numerically and sort before alphanumeric ones; a shorter list that is a
 * prefix of a longer one sorts first. */
int cmp_pre(Span a, Span b)
{
    if (a.n == 0 || b.n == 0) {
        /* a release is above any of its pre-releases */
        return (a.n == 0) - (b.n == 0);
    }

    size_t i = 0, j = 0;

    for (;;) {
        size_t ie = i, je = j;
        while (ie < a.n && a.p[ie] != '.') ie++;
        while (je < b.n && b.p[je] != '.') je++;

        const char *x = a.p + i, *y = b.p + j;
        size_t xn = ie - i, yn = je - j;
        bool xd = all_digits(x, xn), yd = all_digits(y, yn);
        int c;

        if (xd && yd) {
            c = cmp_numeric(x, xn, y, yn);
        } else if (xd != yd) {
            c = xd ? -1 : 1;
        } else {
            size_t m = xn < yn ? xn : yn;
            c = std::memcmp(x, y, m);
            c = c != 0 ? (c > 0) - (c < 0) : (xn > yn) - (xn < yn);
        }
        if (c != 0) {
            return c;
        }

        bool aend = ie >= a.n, bend = je >= b.n;
        if (aend || bend) {
            return bend - aend;  /* both ended: equal */
        }
        i = ie + 1;
        j = je + 1;
    }
}

} // namespace

namespace fl {

bool semver_parse(const char *s, size_t len, Semver *v) noexcept
{
    return parse(s, len, v);
}

int semver_cmp(const char *a, const Semver &va, const char *b,
    const Semver &vb) noexcept
{
    for (int k = 0; k < 3; k++) {
        Span x = span(a, va.num[k]), y = span(b, vb.num[k]);
        int c = cmp_numeric(x.p, x.n, y.p, y.n);
        if (c != 0) {
            return c;
        }
    }
    return cmp_pre(span(a, va.pre), span(b, vb.pre));
}

} // namespace fl

extern "C" {

int fl_semver_cmp(const char *a, size_t alen, const char *b, size_t blen,
    int *ok) noexcept
{
    Semver x, y;

    if (!parse(a, alen, &x) || !parse(b, blen, &y)) {
        if (ok) {
            *ok = 0;
        }
        return 0;
    }
    if (ok) {
        *ok = 1;
    }
    return fl::semver_cmp(a, x, b, y);
}

} // extern "C"
