/*
 * utf8.cpp - the streaming strict UTF-8 and surrogate escape check of
 * utf8.hpp.
 */

#include "utf8.hpp"
#include "text.hpp"
#include "flags_core.h"

#include <cstdio>
#include <cstring>

namespace fl {

namespace {

bool is_high(uint32_t u) noexcept
{
    return u >= 0xd800 && u <= 0xdbff;
}

bool is_low(uint32_t u) noexcept
{
    return u >= 0xdc00 && u <= 0xdfff;
}

} // namespace

/* One byte of the escape machine, at offset pos_: a backslash or what
 * follows one.  Bytes of a multi-byte character come here too; only their
 * lead matters, as an "other" character. */
bool Utf8JsonCheck::json_byte(unsigned char c) noexcept
{
    switch (js_) {

    case J_TEXT:
        if (c == '\\') {
            js_ = J_ESC;
            return true;
        }
        /* anything but the next escape ends a pending pair */
        if (high_pending_) {
            return fail(E_LONE_HIGH, high_at_, high_code_);
        }
        return true;

    case J_ESC:
        if (c == 'u') {
            js_ = J_HEX;
            esc_at_ = pos_ - 1;
            code_ = 0;
            nhex_ = 0;
            return true;
        }
        if (high_pending_) {
            return fail(E_LONE_HIGH, high_at_, high_code_);
        }
        js_ = J_TEXT;
        return true;

    case J_HEX: {
        int v = hex_value(c);
        if (v < 0) {
            /* yajl refuses this; nothing after it needs checking */
            js_ = J_OFF;
            return true;
        }
        code_ = code_ << 4 | static_cast<uint32_t>(v);
        if (++nhex_ < 4) {
            return true;
        }
        js_ = J_TEXT;
        if (high_pending_) {
            if (!is_low(code_)) {
                return fail(E_LONE_HIGH, high_at_, high_code_);
            }
            high_pending_ = false;
        } else if (is_high(code_)) {
            high_pending_ = true;
            high_at_ = esc_at_;
            high_code_ = code_;
        } else if (is_low(code_)) {
            return fail(E_LONE_LOW, esc_at_, code_);
        }
        return true;
    }

    default:
        return true;
    }
}

size_t Utf8JsonCheck::feed(const unsigned char *d, size_t len) noexcept
{
    if (error_ != E_NONE) {
        return 0;
    }

    for (size_t i = 0; i < len; i++, pos_++) {
        if (js_ == J_OFF) {
            pos_ += len - i;
            return len;
        }

        /* the common case: plain ASCII, quotes included */
        if (need_ == 0 && js_ == J_TEXT && !high_pending_) {
            size_t n = plain_ascii_run(d + i, len - i, false);
            i += n;
            pos_ += n;
            if (i == len) {
                break;
            }
        }

        unsigned char c = d[i];

        if (need_ > 0) {
            if (c < lo_ || c > hi_) {
                fail(E_UTF8, seq_at_, 0);
                return i;
            }
            need_--;
            lo_ = 0x80;
            hi_ = 0xbf;
            continue;
        }

        if (c >= 0x80) {
            if (!utf8_lead(c, &need_, &lo_, &hi_)) {
                fail(E_UTF8, pos_, 0);
                return i;
            }
            seq_at_ = pos_;
        }

        if (!json_byte(c)) {
            return i;
        }
    }

    return len;
}

void Utf8JsonCheck::message(char *buf, size_t len) const noexcept
{
    if (buf == nullptr || len == 0) {
        return;
    }
    unsigned long long at = error_at_;

    switch (error_) {
    case E_LONE_HIGH:
    case E_LONE_LOW:
        std::snprintf(buf, len,
                      "request body has a lone surrogate escape \\u%04x "
                      "(byte %llu)", static_cast<unsigned>(error_code_), at);
        break;
    case E_UTF8:
        std::snprintf(buf, len, "request body is not valid UTF-8 (byte %llu)",
                      at);
        break;
    default:
        std::snprintf(buf, len, "request body is not valid UTF-8");
        break;
    }
}

} // namespace fl


extern "C" size_t fl_utf8_prefix(const char *s, size_t len, size_t max)
    noexcept
{
    return s == nullptr ? 0 : fl::utf8_prefix(s, len, max);
}
