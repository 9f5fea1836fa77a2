/*
 * unit_sync_view.h - a Redis reply written by hand as the core reads it
 * (fl_sync_elt_t, the elements in pre-order): S("x"), I(1), A(n) for an
 * array of the n elements that follow, NIL(), and N(v) the number of
 * elements of the array v.  For the tests of sync_reply.cpp and
 * sentinel.cpp.
 */

#ifndef UNIT_SYNC_VIEW_H
#define UNIT_SYNC_VIEW_H

#include <stdint.h>
#include <string.h>

#include "flags_core.h"

static inline fl_sync_elt_t elt(fl_sync_elt_type_t type)
{
    fl_sync_elt_t e;
    memset(&e, 0, sizeof(e));
    e.type = type;
    return e;
}

static inline fl_sync_elt_t S(const char *s)
{
    fl_sync_elt_t e = elt(FL_SYNC_ELT_STRING);
    e.str = s;
    e.len = strlen(s);
    return e;
}

static inline fl_sync_elt_t I(int64_t v)
{
    fl_sync_elt_t e = elt(FL_SYNC_ELT_INTEGER);
    e.integer = v;
    return e;
}

static inline fl_sync_elt_t A(size_t elements)
{
    fl_sync_elt_t e = elt(FL_SYNC_ELT_ARRAY);
    e.elements = elements;
    return e;
}

static inline fl_sync_elt_t NIL(void)
{
    return elt(FL_SYNC_ELT_OTHER);
}

#define N(v)  (sizeof(v) / sizeof((v)[0]))

#endif /* UNIT_SYNC_VIEW_H */
