/*
 * fuzz_view.h - a fuzz input decoded into the flat view of a Redis reply
 * the glue hands the core (fl_sync_elt_t, pre-order), one element a line:
 *
 *   *N      an array claiming N elements (any 64-bit value, "-1" included:
 *           counts that lie are part of the game)
 *   :N      an integer (wraps at 64 bits)
 *   $text   a string: the rest of the line, any bytes but '\n'
 *   other   an element nothing reads (nil, status, error)
 *
 * Each string is a heap copy of its exact size, so a read past it is
 * caught.  For fuzz_sync_reply.cc and fuzz_sentinel.cc.
 */

#ifndef FUZZ_VIEW_H
#define FUZZ_VIEW_H

#include "fuzz_common.h"

#include <cstdlib>
#include <cstring>
#include <vector>

struct View {
    std::vector<fl_sync_elt_t>  elts;
    std::vector<char *>         strings;

    ~View()
    {
        for (char *s : strings) {
            std::free(s);
        }
    }

    /* the element at the one whose string holds [p, p + len) */
    bool holds(const char *p, size_t len) const
    {
        for (const fl_sync_elt_t &e : elts) {
            if (e.type == FL_SYNC_ELT_STRING && e.str != nullptr
                && p >= e.str && p + len <= e.str + e.len)
            {
                return true;
            }
        }
        return false;
    }
};

/* the number of a "*N" or ":N" line, a leading '-' wrapping it */
inline uint64_t view_number(const uint8_t *p, size_t n)
{
    bool neg = n > 0 && p[0] == '-';
    uint64_t v = 0;
    for (size_t i = neg ? 1 : 0; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
        v = v * 10 + (p[i] - '0');
    }
    return neg ? 0 - v : v;
}

inline void decode(const uint8_t *data, size_t size, View *v)
{
    size_t at = 0;

    while (at < size) {
        const uint8_t *nl = static_cast<const uint8_t *>(
            std::memchr(data + at, '\n', size - at));
        size_t end = nl ? static_cast<size_t>(nl - data) : size;
        const uint8_t *line = data + at;
        size_t len = end - at;
        fl_sync_elt_t e;

        std::memset(&e, 0, sizeof(e));
        char type = len ? static_cast<char>(line[0]) : '_';

        if (type == '*') {
            e.type = FL_SYNC_ELT_ARRAY;
            e.elements = static_cast<size_t>(view_number(line + 1, len - 1));
        } else if (type == ':') {
            e.type = FL_SYNC_ELT_INTEGER;
            e.integer = static_cast<int64_t>(view_number(line + 1, len - 1));
        } else if (type == '$') {
            char *s = static_cast<char *>(std::malloc(len > 1 ? len - 1 : 1));
            FUZZ_CHECK(s != nullptr, "malloc");
            if (len > 1) {
                std::memcpy(s, line + 1, len - 1);
            }
            v->strings.push_back(s);
            e.type = FL_SYNC_ELT_STRING;
            e.str = s;
            e.len = len - 1;
        } else {
            e.type = FL_SYNC_ELT_OTHER;
        }

        v->elts.push_back(e);
        at = end + 1;
    }
}

#endif /* FUZZ_VIEW_H */
