/*
 * sentinel.cpp - what flags_sync reads of Redis Sentinel (docs/sync.md
 * "Sentinel"): the master a Sentinel names, the role a node says it has,
 * and whether a message of the +switch-master channel is about our master.
 *
 * The glue asks and reads (hiredis, with the reply's size bounded) and
 * hands the reply over as a flat view (fl_sync_elt_t, pre-order), as a
 * round's answer is.  Decisions:
 *  - a master is an IPv4 or IPv6 address and a port 1 to 65535: a Sentinel
 *    that announces host names (announce-hostnames yes) is refused, since
 *    resolving a name would block the worker;
 *  - a reply must be exactly one array of two strings, nothing after it;
 *  - a node is a master only when ROLE's first element is "master";
 *  - a message moves our master only when its channel is +switch-master
 *    and its first word is our name, whole;
 *  - a subscription is confirmed only by ["subscribe", "+switch-master",
 *    N]: a Sentinel that answers anything else is not listened to.
 */

#include "flags_core.h"

#include <arpa/inet.h>
#include <cstring>

namespace {

/* view[i] is a string */
bool is_string(const fl_sync_elt_t *view, size_t n, size_t i) noexcept
{
    return i < n && view[i].type == FL_SYNC_ELT_STRING
           && (view[i].str != nullptr || view[i].len == 0);
}

bool same(const fl_sync_elt_t &e, const char *s, size_t len) noexcept
{
    return e.len == len && (len == 0 || std::memcmp(e.str, s, len) == 0);
}

/* The view is one whole reply: every element an array claims follows it,
 * and nothing follows the reply's end. */
bool whole(const fl_sync_elt_t *view, size_t n) noexcept
{
    size_t need = 1;

    for (size_t i = 0; i < n; i++) {
        if (need == 0) {
            return false;
        }

        need--;

        if (view[i].type == FL_SYNC_ELT_ARRAY) {
            if (view[i].elements > n - i - 1 - need) {
                return false;
            }
            need += view[i].elements;
        }
    }

    return need == 0;
}

/* An array of k strings and nothing else: the whole view. */
bool strings(const fl_sync_elt_t *view, size_t n, size_t k) noexcept
{
    if (n != k + 1 || view[0].type != FL_SYNC_ELT_ARRAY
        || view[0].elements != k)
    {
        return false;
    }

    for (size_t i = 1; i <= k; i++) {
        if (!is_string(view, n, i)) {
            return false;
        }
    }

    return true;
}

} // namespace


extern "C" fl_sentinel_status_t
fl_sentinel_master(const fl_sync_elt_t *view, size_t n, fl_sync_addr_t *out)
    noexcept
{
    char host[64];
    uint32_t port = 0;

    if (out == nullptr) {
        return FL_SENTINEL_MALFORMED;
    }

    /* a refusal leaves no address behind */
    std::memset(out, 0, sizeof(*out));

    if (view == nullptr || n == 0) {
        return FL_SENTINEL_MALFORMED;
    }

    if (!whole(view, n)) {
        return FL_SENTINEL_MALFORMED;
    }

    if (!strings(view, n, 2)) {
        return FL_SENTINEL_NOT_PAIR;
    }

    const fl_sync_elt_t &h = view[1];
    const fl_sync_elt_t &p = view[2];

    if (h.len == 0 || h.len >= sizeof(host)) {
        return FL_SENTINEL_HOST;
    }

    std::memcpy(host, h.str, h.len);
    host[h.len] = '\0';

    if (std::memchr(h.str, '\0', h.len) != nullptr) {
        return FL_SENTINEL_HOST;
    }

    if (inet_pton(AF_INET, host, out->addr) == 1) {
        out->family = 4;
    } else if (inet_pton(AF_INET6, host, out->addr) == 1) {
        out->family = 6;
    } else {
        std::memset(out, 0, sizeof(*out));
        return FL_SENTINEL_HOST;
    }

    if (p.len == 0 || p.len > 5) {
        std::memset(out, 0, sizeof(*out));
        return FL_SENTINEL_PORT;
    }

    for (size_t i = 0; i < p.len; i++) {
        if (p.str[i] < '0' || p.str[i] > '9') {
            std::memset(out, 0, sizeof(*out));
            return FL_SENTINEL_PORT;
        }
        port = port * 10 + static_cast<uint32_t>(p.str[i] - '0');
    }

    if (port == 0 || port > 65535) {
        std::memset(out, 0, sizeof(*out));
        return FL_SENTINEL_PORT;
    }

    out->port = static_cast<uint16_t>(port);

    return FL_SENTINEL_OK;
}


extern "C" const char *
fl_sentinel_status_text(fl_sentinel_status_t st) noexcept
{
    switch (st) {
    case FL_SENTINEL_OK:
        return "";
    case FL_SENTINEL_MALFORMED:
        return "a malformed reply";
    case FL_SENTINEL_NOT_PAIR:
        return "the reply is not an address and a port";
    case FL_SENTINEL_HOST:
        return "the master's host is not an IP address";
    case FL_SENTINEL_PORT:
        return "the master's port is not a port";
    }

    return "unknown status";
}


extern "C" fl_sync_role_t
fl_sync_role(const fl_sync_elt_t *view, size_t n) noexcept
{
    if (view == nullptr || n < 2 || !whole(view, n)
        || view[0].type != FL_SYNC_ELT_ARRAY
        || view[0].elements == 0 || !is_string(view, n, 1))
    {
        return FL_SYNC_ROLE_UNKNOWN;
    }

    const fl_sync_elt_t &r = view[1];

    if (same(r, "master", 6)) {
        return FL_SYNC_ROLE_MASTER;
    }

    if (same(r, "slave", 5) || same(r, "replica", 7)) {
        return FL_SYNC_ROLE_REPLICA;
    }

    if (same(r, "sentinel", 8)) {
        return FL_SYNC_ROLE_SENTINEL;
    }

    return FL_SYNC_ROLE_UNKNOWN;
}


extern "C" const char *
fl_sync_role_text(fl_sync_role_t role) noexcept
{
    switch (role) {
    case FL_SYNC_ROLE_MASTER:
        return "master";
    case FL_SYNC_ROLE_REPLICA:
        return "replica";
    case FL_SYNC_ROLE_SENTINEL:
        return "sentinel";
    case FL_SYNC_ROLE_UNKNOWN:
        break;
    }

    return "unknown";
}


extern "C" int
fl_sentinel_switched(const fl_sync_elt_t *view, size_t n, const char *name,
    size_t name_len) noexcept
{
    if (view == nullptr || name == nullptr || name_len == 0
        || !strings(view, n, 3)
        || !same(view[1], "message", 7)
        || !same(view[2], "+switch-master", 14))
    {
        return 0;
    }

    const fl_sync_elt_t &m = view[3];

    return m.len > name_len && std::memcmp(m.str, name, name_len) == 0
           && m.str[name_len] == ' ';
}


extern "C" int
fl_sentinel_subscribed(const fl_sync_elt_t *view, size_t n) noexcept
{
    return view != nullptr && n == 4 && whole(view, n)
           && view[0].type == FL_SYNC_ELT_ARRAY && view[0].elements == 3
           && is_string(view, n, 1) && same(view[1], "subscribe", 9)
           && is_string(view, n, 2) && same(view[2], "+switch-master", 14)
           && view[3].type == FL_SYNC_ELT_INTEGER;
}
