/*
 * dashboard.cpp - flags_dashboard's bytes (docs/dashboard.md): the page,
 * its script and its style sheet, built into the module from
 * src/dashboard/ (src/dashboard/embed.sh writes dashboard_assets.inc at
 * build time), each with its content type and a strong tag; and the
 * page's config.json.
 */

#include "flags_core.h"
#include "hash.hpp"
#include "json_writer.hpp"

#include <cstring>

#include "dashboard_assets.inc"

namespace {

struct asset {
    const char             *path;       /* below the location */
    const unsigned char    *data;
    size_t                  len;
    const char             *type;
};

const asset assets[] = {
    {"", dashboard_index_html, sizeof(dashboard_index_html),
     "text/html; charset=utf-8"},
    {"index.html", dashboard_index_html, sizeof(dashboard_index_html),
     "text/html; charset=utf-8"},
    {"app.js", dashboard_app_js, sizeof(dashboard_app_js),
     "text/javascript; charset=utf-8"},
    {"app.css", dashboard_app_css, sizeof(dashboard_app_css),
     "text/css; charset=utf-8"},
};

} // namespace

extern "C" {

int fl_dashboard_asset(const char *path, size_t len, fl_asset_t *out) noexcept
{
    for (const asset &a : assets) {
        if (std::strlen(a.path) == len && std::memcmp(a.path, path, len) == 0)
        {
            out->data = a.data;
            out->len = a.len;
            out->type = a.type;
            /* the bytes' own hash: a new build with other bytes, a new tag */
            out->etag = fl_murmur3_32(a.data, a.len, 0x0da5b0a7u)
                        | (static_cast<uint64_t>(a.len) << 32);
            return 0;
        }
    }
    return -1;
}

size_t fl_dashboard_config_json_bound(size_t admin_len) noexcept
{
    return 96 + fl::str_bound(admin_len);
}

size_t fl_dashboard_config_json(const char *admin, size_t admin_len,
    char *buf) noexcept
{
    char *o = fl::put_lit(buf, "{\"admin\":");
    o = admin != nullptr ? fl::put_str(o, admin, admin_len)
                         : fl::put_lit(o, "null");
    o = fl::put_lit(o, ",\"status\":\"status.json\",\"events\":\"events\"}");
    return static_cast<size_t>(o - buf);
}

} // extern "C"
