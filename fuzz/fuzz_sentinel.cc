/*
 * fuzz_sentinel.cc - what a Redis Sentinel (or anything that answers in
 * its place) may send flags_sync sentinel://, as hostile as the bytes make
 * it (docs/sync.md "Sentinel"; src/core/sentinel.cpp).
 *
 * The input is decoded into the flat view the glue hands the core, one
 * element a line, as fuzz_sync_reply.cc does:
 *
 *   *N      an array claiming N elements (counts that lie included)
 *   :N      an integer
 *   $text   a string: the rest of the line
 *   other   an element nothing reads (nil, status, error)
 *
 * Each string is a heap copy of its exact size, so a read past it is
 * caught.  The view is read as a get-master-addr-by-name answer, as a
 * ROLE reply, as a +switch-master message and as a subscription's
 * confirmation.  Checked: statuses in
 * range; an address only from exactly an array of two strings, of family
 * 4 or 6 and a port 1 to 65535 whose digits are the second string; no
 * address left behind a refusal; a role and a switch only from an array
 * whose strings say so.
 */

#include "fuzz_view.h"

#include <vector>

namespace {

/* the value of a port's digits, as the check below reads them */
uint64_t number_of(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

bool is(const fl_sync_elt_t &e, const char *s)
{
    return e.type == FL_SYNC_ELT_STRING && e.len == std::strlen(s)
           && std::memcmp(e.str, s, e.len) == 0;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    View v;
    decode(data, size, &v);

    const fl_sync_elt_t *view = v.elts.empty() ? nullptr : v.elts.data();
    size_t n = v.elts.size();

    /* the master's address */
    fl_sync_addr_t a;
    std::memset(&a, 0xa5, sizeof(a));
    fl_sentinel_status_t st = fl_sentinel_master(view, n, &a);

    FUZZ_CHECK(st >= FL_SENTINEL_OK && st <= FL_SENTINEL_PORT,
               "master: status %d", static_cast<int>(st));
    FUZZ_CHECK(fl_sentinel_status_text(st) != nullptr, "master: no text");

    if (st == FL_SENTINEL_OK) {
        FUZZ_CHECK(n == 3 && view[0].type == FL_SYNC_ELT_ARRAY
                   && view[0].elements == 2
                   && view[1].type == FL_SYNC_ELT_STRING
                   && view[2].type == FL_SYNC_ELT_STRING,
                   "master: an address from a reply of %zu elements", n);
        FUZZ_CHECK(a.family == 4 || a.family == 6, "master: family %d",
                   a.family);
        FUZZ_CHECK(a.port >= 1, "master: port 0");
        FUZZ_CHECK(number_of(reinterpret_cast<const uint8_t *>(view[2].str),
                             view[2].len) == a.port,
                   "master: port %u is not the reply's", a.port);
    } else {
        FUZZ_CHECK(a.family == 0 && a.port == 0,
                   "master: an address left behind a refusal");
    }

    /* ROLE */
    fl_sync_role_t role = fl_sync_role(view, n);

    FUZZ_CHECK(role >= FL_SYNC_ROLE_MASTER && role <= FL_SYNC_ROLE_UNKNOWN,
               "role %d", static_cast<int>(role));
    FUZZ_CHECK(fl_sync_role_text(role) != nullptr, "role: no text");

    if (role == FL_SYNC_ROLE_MASTER) {
        FUZZ_CHECK(n >= 2 && view[0].type == FL_SYNC_ELT_ARRAY
                   && is(view[1], "master"), "role: master from no \"master\"");
    }

    /* +switch-master */
    int sw = fl_sentinel_switched(view, n, "shop", 4);

    FUZZ_CHECK(sw == 0 || sw == 1, "switched %d", sw);

    if (sw) {
        FUZZ_CHECK(n == 4 && is(view[1], "message")
                   && is(view[2], "+switch-master")
                   && view[3].len >= 5
                   && std::memcmp(view[3].str, "shop ", 5) == 0,
                   "switched: from another message");
    }

    /* the subscription's confirmation */
    int sub = fl_sentinel_subscribed(view, n);

    FUZZ_CHECK(sub == 0 || (sub == 1 && n == 4 && is(view[1], "subscribe")
                            && is(view[2], "+switch-master")
                            && view[3].type == FL_SYNC_ELT_INTEGER),
               "subscribed %d from another reply", sub);

    return 0;
}
