/*
 * number.hpp - exact decimals from JSON number text (internal to the core).
 *
 * Percentages, rollback rates and numeric rules are read and compared
 * without going through a double, so 12.345 is exactly 12345 milli-percent
 * and 0.30000000000000001 > 0.3 holds.
 */

#ifndef FLAGS_NUMBER_HPP
#define FLAGS_NUMBER_HPP

#include "flags_core.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace fl {

/* ---------------------------------------------------------- decimals */

/*
 * An exact decimal read from JSON number syntax, normalized as
 *     (neg ? -1 : 1) * 0.D1 D2 ... Dn * 10^exp
 * with D1 != 0 and Dn != 0; zero has no digits (and is never negative).
 * The digits are the concatenation of two spans of the source text (the
 * integer and the fraction part, the '.' left out), so a trait value can
 * be compared without copying it.  The exponent is clamped far beyond any
 * digit count a real input can have, so the comparison stays exact.
 */
struct DecimalView {
    bool         neg = false;
    int64_t      exp = 0;
    const char  *a = nullptr;
    size_t       an = 0;
    const char  *b = nullptr;
    size_t       bn = 0;

    size_t ndigits() const { return an + bn; }
    char digit(size_t i) const { return i < an ? a[i] : b[i - an]; }
};

/* Strict JSON number syntax: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
 * with nothing before or after (no '+', no spaces, no inf/nan). */
bool parse_decimal(const char *s, size_t len, DecimalView *out);

/* <0, 0, >0 by value. */
int decimal_cmp(const DecimalView &x, const DecimalView &y);

/* The value times 10^scale as an integer: false when negative or above
 * limit; *exact is false when digits would be lost (too many decimals). */
bool decimal_scaled(const DecimalView &d, int scale, uint64_t limit,
    uint64_t *out, bool *exact);

/* fl_parse_milli() on JSON number text, without the '%': the one reader
 * of rolloutPercentage, rollback rates and override percentages. */
fl_milli_status_t parse_milli(const char *s, size_t len, uint32_t *out)
    noexcept;

/* A non-negative JSON integer written with digits only (what our writers
 * produce); false on anything else or overflow. */
bool parse_u64(const char *s, size_t len, uint64_t *out) noexcept;

/* A DecimalView that owns its digits (for rule values). */
struct Decimal {
    bool         neg = false;
    int64_t      exp = 0;
    std::string  digits;

    static Decimal from(const DecimalView &v);
    DecimalView view() const;
};

} // namespace fl

#endif /* FLAGS_NUMBER_HPP */
