/*
 * number.cpp - exact decimals in JSON number syntax.
 *
 * Percentages ("12.345", "1.25e1") and the operands of gt/gte/lt/lte are
 * read from their text, never through a double, so 0.1 + 0.2 style
 * rounding cannot move a user across a rollout boundary or a rule.
 */

#include "number.hpp"

namespace fl {

namespace {

/* Larger than any digit count plus any exponent that can change a
 * comparison; clamping there keeps int64 arithmetic far from overflow. */
constexpr int64_t exp_clamp = INT64_C(1) << 40;

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

} // namespace

bool parse_decimal(const char *s, size_t len, DecimalView *out)
{
    size_t i = 0;
    DecimalView d;

    if (s == nullptr || len == 0) {
        return false;
    }

    if (s[i] == '-') {
        d.neg = true;
        i++;
    }

    /* integer part: 0 or [1-9][0-9]* */
    size_t int_start = i;
    if (i < len && s[i] == '0') {
        i++;
    } else if (i < len && s[i] >= '1' && s[i] <= '9') {
        while (i < len && is_digit(s[i])) i++;
    } else {
        return false;
    }
    size_t int_end = i;

    size_t frac_start = i, frac_end = i;
    if (i < len && s[i] == '.') {
        i++;
        frac_start = i;
        while (i < len && is_digit(s[i])) i++;
        frac_end = i;
        if (frac_end == frac_start) {
            return false;
        }
    }

    int64_t e = 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        bool eneg = false;
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-')) {
            eneg = s[i] == '-';
            i++;
        }
        size_t es = i;
        while (i < len && is_digit(s[i])) {
            if (e < exp_clamp) {
                e = e * 10 + (s[i] - '0');
            }
            i++;
        }
        if (i == es) {
            return false;
        }
        if (e > exp_clamp) {
            e = exp_clamp;
        }
        if (eneg) {
            e = -e;
        }
    }

    if (i != len) {
        return false;
    }

    /* Normalize: drop leading zeros of the integer part (continuing into
     * the fraction when the integer part is zero) and trailing zeros. */
    const char *a = s + int_start;
    size_t an = int_end - int_start;
    const char *b = s + frac_start;
    size_t bn = frac_end - frac_start;
    int64_t point = static_cast<int64_t>(an);   /* digits before the point */

    while (an > 0 && *a == '0') {
        a++;
        an--;
        point--;
    }
    if (an == 0) {
        while (bn > 0 && *b == '0') {
            b++;
            bn--;
            point--;
        }
    }
    while (bn > 0 && b[bn - 1] == '0') {
        bn--;
    }
    if (bn == 0) {
        while (an > 0 && a[an - 1] == '0') {
            an--;
        }
    }

    if (an + bn == 0) {
        /* zero, whatever its sign or exponent */
        *out = DecimalView();
        return true;
    }

    d.exp = point + e;
    d.a = a;
    d.an = an;
    d.b = b;
    d.bn = bn;
    *out = d;
    return true;
}

int decimal_cmp(const DecimalView &x, const DecimalView &y)
{
    bool xz = x.ndigits() == 0, yz = y.ndigits() == 0;

    if (xz || yz) {
        if (xz && yz) {
            return 0;
        }
        if (xz) {
            return y.neg ? 1 : -1;
        }
        return x.neg ? -1 : 1;
    }

    if (x.neg != y.neg) {
        return x.neg ? -1 : 1;
    }

    /* Same sign: compare magnitudes, then flip for negatives. */
    int c = 0;
    if (x.exp != y.exp) {
        c = x.exp < y.exp ? -1 : 1;
    } else {
        size_t n = x.ndigits() < y.ndigits() ? x.ndigits() : y.ndigits();
        for (size_t i = 0; i < n && c == 0; i++) {
            char dx = x.digit(i), dy = y.digit(i);
            if (dx != dy) {
                c = dx < dy ? -1 : 1;
            }
        }
        if (c == 0 && x.ndigits() != y.ndigits()) {
            /* no trailing zeros: the longer one has more non-zero digits */
            c = x.ndigits() < y.ndigits() ? -1 : 1;
        }
    }

    return x.neg ? -c : c;
}

bool decimal_scaled(const DecimalView &d, int scale, uint64_t limit,
    uint64_t *out, bool *exact)
{
    size_t n = d.ndigits();

    *exact = true;
    if (n == 0) {
        *out = 0;
        return true;
    }
    if (d.neg) {
        return false;
    }

    /* digits before the point once scaled */
    int64_t e = d.exp + scale;
    if (e > 19) {
        return false;           /* >= 10^19: above any limit we use */
    }
    if (e <= 0) {
        *out = 0;               /* 0 < value < 1 */
        *exact = false;
        return true;
    }

    uint64_t v = 0;
    for (int64_t i = 0; i < e; i++) {
        size_t k = static_cast<size_t>(i);
        v = v * 10 + (k < n ? static_cast<uint64_t>(d.digit(k) - '0') : 0);
    }
    if (static_cast<size_t>(e) < n) {
        *exact = false;
    }
    /* limit plus any fraction is above the limit too: out of range is
     * the better answer than "too many decimals" for 100.0001 */
    if (v > limit || (v == limit && !*exact)) {
        return false;
    }
    *out = v;
    return true;
}

fl_milli_status_t parse_milli(const char *s, size_t len, uint32_t *out) noexcept
{
    DecimalView d;
    uint64_t v;
    bool exact;

    if (!parse_decimal(s, len, &d)) {
        return FL_MILLI_SYNTAX;
    }
    if (!decimal_scaled(d, 3, FL_MILLI_MAX, &v, &exact)) {
        return FL_MILLI_RANGE;
    }
    if (!exact) {
        return FL_MILLI_DECIMALS;
    }
    *out = static_cast<uint32_t>(v);
    return FL_MILLI_OK;
}

bool parse_u64(const char *s, size_t len, uint64_t *out) noexcept
{
    if (len == 0 || (len > 1 && s[0] == '0')) {
        return false;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        uint64_t d = static_cast<uint64_t>(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

Decimal Decimal::from(const DecimalView &v)
{
    Decimal d;

    d.neg = v.neg;
    d.exp = v.exp;
    d.digits.reserve(v.ndigits());
    d.digits.append(v.a, v.an);
    d.digits.append(v.b, v.bn);
    return d;
}

DecimalView Decimal::view() const
{
    DecimalView v;

    v.neg = neg;
    v.exp = exp;
    v.a = digits.data();
    v.an = digits.size();
    return v;
}

} // namespace fl


extern "C" {

fl_milli_status_t fl_parse_milli(const char *s, size_t len, uint32_t *milli)
    noexcept
{
    if (s == nullptr || milli == nullptr) {
        return FL_MILLI_SYNTAX;
    }
    if (len > 0 && s[len - 1] == '%') {
        len--;
    }
    return fl::parse_milli(s, len, milli);
}

} // extern "C"
