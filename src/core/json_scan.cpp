/*
 * json_scan.cpp - the one-buffer fast path in front of yajl: see
 * json_scan.hpp for what it accepts, what it declines and why that keeps
 * every outcome yajl's.
 */

#include "json_scan.hpp"
#include "arena.hpp"
#include "json_reader.hpp"
#include "text.hpp"

#include <cstdint>
#include <cstring>

namespace fl {

namespace {

bool hex4(const unsigned char *p, uint32_t *out) noexcept
{
    uint32_t v = 0;

    for (int i = 0; i < 4; i++) {
        int h = hex_value(p[i]);
        if (h < 0) {
            return false;
        }
        v = v << 4 | static_cast<uint32_t>(h);
    }
    *out = v;
    return true;
}

unsigned char *put_utf8(unsigned char *o, uint32_t cp) noexcept
{
    if (cp < 0x80) {
        *o++ = static_cast<unsigned char>(cp);
    } else if (cp < 0x800) {
        *o++ = static_cast<unsigned char>(0xc0 | cp >> 6);
        *o++ = static_cast<unsigned char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *o++ = static_cast<unsigned char>(0xe0 | cp >> 12);
        *o++ = static_cast<unsigned char>(0x80 | (cp >> 6 & 0x3f));
        *o++ = static_cast<unsigned char>(0x80 | (cp & 0x3f));
    } else {
        *o++ = static_cast<unsigned char>(0xf0 | cp >> 18);
        *o++ = static_cast<unsigned char>(0x80 | (cp >> 12 & 0x3f));
        *o++ = static_cast<unsigned char>(0x80 | (cp >> 6 & 0x3f));
        *o++ = static_cast<unsigned char>(0x80 | (cp & 0x3f));
    }
    return o;
}

} // namespace

namespace scan_detail {

bool scan_escaped(scanner &s, const unsigned char *start,
    const unsigned char *q, const unsigned char **str, size_t *len,
    bool *plain) noexcept
{
    if (q == s.end || *q != '\\') {
        return false;               /* unterminated, or a control byte */
    }

    /* escapes: decode into the scratch buffer (never longer than the
     * text: every escape is at least as long as what it stands for) */
    if (s.scratch == nullptr) {
        s.scratch = static_cast<unsigned char *>(alloc_bytes(s.alloc, s.len));
        if (s.scratch == nullptr) {
            return false;
        }
    }
    unsigned char *o = s.scratch;
    std::memcpy(o, start, static_cast<size_t>(q - start));
    o += q - start;
    *plain = true;

    for (;;) {
        if (q == s.end) {
            return false;
        }
        unsigned char c = *q;

        if (c == '"') {
            break;
        }
        if (c != '\\') {
            if (c < 0x20) {
                return false;
            }
            const unsigned char *r = string_run(q, s.end);
            std::memcpy(o, q, static_cast<size_t>(r - q));
            o += r - q;
            q = r;
            continue;
        }
        if (s.end - q < 2) {
            return false;
        }
        switch (q[1]) {
        case '"':  *o++ = '"';  break;
        case '\\': *o++ = '\\'; break;
        case '/':  *o++ = '/';  *plain = false; break;
        case 'b':  *o++ = '\b'; break;
        case 'f':  *o++ = '\f'; break;
        case 'n':  *o++ = '\n'; break;
        case 'r':  *o++ = '\r'; break;
        case 't':  *o++ = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (s.end - q < 6 || !hex4(q + 2, &cp) || cp == 0) {
                return false;       /* \u0000: left to yajl */
            }
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                return false;
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (s.end - q < 12 || q[6] != '\\' || q[7] != 'u'
                    || !hex4(q + 8, &lo) || lo < 0xdc00 || lo > 0xdfff)
                {
                    return false;
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                q += 6;
            }
            o = put_utf8(o, cp);
            q += 6;
            *plain = false;
            continue;
        }
        default:
            return false;
        }
        q += 2;
    }

    *str = s.scratch;
    *len = static_cast<size_t>(o - s.scratch);
    s.p = q + 1;
    return true;
}

inline bool digit(unsigned char c) noexcept
{
    return c >= '0' && c <= '9';
}

/* A number in JSON's grammar, its text as it is. */
bool scan_number(scanner &s, const unsigned char **str, size_t *len) noexcept
{
    const unsigned char *p = s.p, *e = s.end;

    if (p < e && *p == '-') {
        p++;
    }
    if (p == e || !digit(*p)) {
        return false;
    }
    if (*p == '0') {
        p++;
    } else {
        while (p < e && digit(*p)) {
            p++;
        }
    }
    if (p < e && *p == '.') {
        p++;
        if (p == e || !digit(*p)) {
            return false;
        }
        while (p < e && digit(*p)) {
            p++;
        }
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) {
            p++;
        }
        if (p == e || !digit(*p)) {
            return false;
        }
        while (p < e && digit(*p)) {
            p++;
        }
    }
    /* "01", "1x", "-" ...: whatever follows must end the value */
    if (p < e && (digit(*p) || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
                  || *p == '.' || *p == '+' || *p == '-'))
    {
        return false;
    }
    *str = s.p;
    *len = static_cast<size_t>(p - s.p);
    s.p = p;
    return true;
}

bool scan_literal(scanner &s, const char *lit, size_t n) noexcept
{
    if (static_cast<size_t>(s.end - s.p) < n || std::memcmp(s.p, lit, n) != 0) {
        return false;
    }
    const unsigned char *p = s.p + n;
    if (p < s.end && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
                      || digit(*p)))
    {
        return false;
    }
    s.p = p;
    return true;
}

} // namespace scan_detail

} // namespace fl
