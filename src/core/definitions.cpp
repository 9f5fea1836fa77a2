/*
 * definitions.cpp - the pure parts of definitions=runtime
 * (docs/definitions-core.md): the difference between two versions of a
 * project, the answer of a write, one flag put into or deleted from a
 * document, and a stored version's file with its history entry.
 *
 * Decisions:
 *  - A flag is the same when its name and def_hash are: the hash is
 *    canonical (project.cpp, finish_flag), so key order, whitespace and
 *    unknown fields are no change, and a segment's rules are part of every
 *    flag that names the segment.
 *  - PUT and DELETE of one flag edit the text: the document is parsed
 *    once (yajl, through json_read) to know it is valid JSON and to read
 *    decoded keys and names, and walked once more for byte offsets; every
 *    byte outside the element put or deleted is copied as it was.  The
 *    walk trusts the parse (it runs only on text yajl accepted) but never
 *    reads past the end.
 *  - The history entry and the stored file's header are the same line,
 *    so GET .../history copies lines and never re-serializes.
 */

#include "flags_core.h"
#include "arena.hpp"
#include "json_reader.hpp"
#include "json_writer.hpp"
#include "project.hpp"
#include "text.hpp"
#include "utf8.hpp"

#include <cstring>
#include <string>

namespace fl {

namespace {

/* The flags file's nesting limit (project.cpp). */
constexpr unsigned doc_depth = 512;

/* ------------------------------------------------------------ names */

const Flag *flag_at(const fl_project_t *p, long idx) noexcept
{
    if (p == nullptr || idx < 0
        || static_cast<size_t>(idx) >= p->flags.size())
    {
        return nullptr;
    }
    return &p->flags[static_cast<size_t>(idx)];
}

/* The flag an entry names: the new project's for SAME, ADDED and
 * CHANGED, the old one's for REMOVED; nullptr when out of range. */
const Flag *flag_of(const fl_project_t *old, const fl_project_t *nw,
    const fl_defs_change_t &c) noexcept
{
    return c.kind == FL_DEFS_REMOVED ? flag_at(old, c.old_idx)
                                     : flag_at(nw, c.new_idx);
}

/* Bytes of "added":[..],"changed":[..],"removed":[..] with room to
 * spare. */
size_t lists_bound(const fl_project_t *old, const fl_project_t *nw,
    const fl_defs_change_t *c, size_t n) noexcept
{
    size_t b = sizeof("\"added\":[],\"changed\":[],\"removed\":[]");

    for (size_t i = 0; i < n; i++) {
        const Flag *f = flag_of(old, nw, c[i]);
        if (f != nullptr) {
            b += f->json_name.size() + 1;
        }
    }
    return b;
}

char *put_list(char *o, const fl_project_t *old, const fl_project_t *nw,
    const fl_defs_change_t *c, size_t n, fl_defs_kind_t kind) noexcept
{
    bool first = true;

    *o++ = '[';
    for (size_t i = 0; i < n; i++) {
        if (c[i].kind != kind) {
            continue;
        }
        const Flag *f = flag_of(old, nw, c[i]);
        if (f == nullptr) {
            continue;
        }
        if (!first) {
            *o++ = ',';
        }
        first = false;
        std::memcpy(o, f->json_name.data(), f->json_name.size());
        o += f->json_name.size();
    }
    *o++ = ']';
    return o;
}

char *put_lists(char *o, const fl_project_t *old, const fl_project_t *nw,
    const fl_defs_change_t *c, size_t n) noexcept
{
    o = put_lit(o, "\"added\":");
    o = put_list(o, old, nw, c, n, FL_DEFS_ADDED);
    o = put_lit(o, ",\"changed\":");
    o = put_list(o, old, nw, c, n, FL_DEFS_CHANGED);
    o = put_lit(o, ",\"removed\":");
    return put_list(o, old, nw, c, n, FL_DEFS_REMOVED);
}

/* One "kept" element at most: {"flag":,"rolledBack":false,"override":}
 * and an override of at most 32 bytes, with room to spare. */
constexpr size_t kept_fixed = 96;

/* ------------------------------------------------------------ text */

inline size_t skip_ws(const char *d, size_t n, size_t p) noexcept
{
    while (p < n && yajl_space(static_cast<unsigned char>(d[p]))) {
        p++;
    }
    return p;
}

/* The "flags" array of a document, and where the element of a name is. */
struct flags_array {
    size_t  open;           /* its '[' */
    size_t  close;          /* its ']' */
    size_t  count;          /* elements */
    size_t  last_ws;        /* the whitespace before the last element */
    size_t  last_b, last_e; /* the last element */
    bool    found;
    size_t  m_b, m_e;       /* the element of the name */
    size_t  prev_e;         /* the end of the one before it (when any) */
    size_t  next_b;         /* the start of the one after it (when any) */
    bool    has_prev, has_next;
};

bool is_named(const jval *v, const char *name, size_t name_len) noexcept
{
    if (v == nullptr || v->kind != J_OBJECT) {
        return false;
    }
    const jval *nm = jmember(v, "name", 4);
    return nm != nullptr && nm->kind == J_STRING && nm->len == name_len
           && (name_len == 0 || std::memcmp(nm->str, name, name_len) == 0);
}

/*
 * Parses doc, finds its last "flags" member (an array) and, in it, the
 * first element named name.  FL_ERR_INVALID with a message when doc is
 * not a JSON object with a "flags" array.
 */
fl_status_t find_flags(const char *d, size_t n, const char *name,
    size_t name_len, const fl_alloc_t *a, flags_array *fa, char *err,
    size_t err_len) noexcept
{
    jval *root = nullptr;
    jread_error e;

    std::memset(fa, 0, sizeof(*fa));
    if (skip_ws(d, n, 0) == n) {
        set_err(err, err_len, "document is empty");
        return FL_ERR_INVALID;
    }
    json_read(d, n, a, doc_depth, &root, &e);
    switch (e.kind) {
    case jread_error::NONE:
        break;
    case jread_error::NOMEM:
        set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    case jread_error::TOO_DEEP:
        set_err(err, err_len, "document nesting is deeper than %u levels",
                doc_depth);
        return FL_ERR_INVALID;
    default:
        set_err(err, err_len, "document is not valid JSON: %s", e.why);
        return FL_ERR_INVALID;
    }
    if (root == nullptr) {
        set_err(err, err_len, "document is empty");
        return FL_ERR_INVALID;
    }
    if (root->kind != J_OBJECT) {
        set_err(err, err_len, "document is not a JSON object");
        return FL_ERR_INVALID;
    }

    /* the members, walked alongside the tree's (same order) */
    size_t p = skip_ws(d, n, 0) + 1;        /* after '{' */
    const jval *m = root->first;
    const jval *flags = nullptr;
    size_t flags_at = 0;

    p = skip_ws(d, n, p);
    while (m != nullptr && p < n && d[p] == '"') {
        p = skip_ws(d, n, json_skip_value(d, n, p));   /* the key */
        p = skip_ws(d, n, p + 1);           /* after ':' */
        if (m->key_len == 5 && std::memcmp(m->key, "flags", 5) == 0) {
            flags = m;
            flags_at = p;
        }
        p = skip_ws(d, n, json_skip_value(d, n, p));
        if (p < n && d[p] == ',') {
            p = skip_ws(d, n, p + 1);
        }
        m = m->next;
    }
    if (m != nullptr) {
        set_err(err, err_len, "document could not be walked");
        return FL_ERR_INTERNAL;
    }
    if (flags == nullptr || flags->kind != J_ARRAY || flags_at >= n
        || d[flags_at] != '[')
    {
        set_err(err, err_len, "document has no \"flags\" array");
        return FL_ERR_INVALID;
    }

    fa->open = flags_at;
    size_t ws = flags_at + 1;
    p = skip_ws(d, n, ws);
    for (const jval *v = flags->first; v != nullptr; v = v->next) {
        size_t b = p, end = json_skip_value(d, n, p);

        if (fa->found && !fa->has_next && fa->m_b == fa->last_b
            && fa->count > 0)
        {
            fa->has_next = true;
            fa->next_b = b;
        }
        if (!fa->found && is_named(v, name, name_len)) {
            fa->found = true;
            fa->m_b = b;
            fa->m_e = end;
            fa->has_prev = fa->count > 0;
            fa->prev_e = fa->last_e;
        }
        fa->last_ws = ws;
        fa->last_b = b;
        fa->last_e = end;
        fa->count++;

        p = skip_ws(d, n, end);
        if (p < n && d[p] == ',') {
            ws = p + 1;
            p = skip_ws(d, n, ws);
        }
    }
    if (p >= n || d[p] != ']') {
        set_err(err, err_len, "document could not be walked");
        return FL_ERR_INTERNAL;
    }
    fa->close = p;
    return FL_OK;
}

/* A name for a one-line message: JSON-escaped, without its quotes, cut
 * at 64 bytes on a character boundary ("..." then). */
std::string shown(const char *s, size_t len)
{
    size_t cut = utf8_prefix(s, len, 64);
    std::string out;

    append_str(out, s, cut);
    out = out.substr(1, out.size() - 2);
    if (cut < len) {
        out += "...";
    }
    return out;
}

struct piece {
    const char  *p;
    size_t       n;
};

/* The pieces joined into memory from a, NUL-terminated. */
fl_status_t join(const piece *pc, size_t npc, const fl_alloc_t *a,
    char **out, size_t *out_len, char *err, size_t err_len) noexcept
{
    size_t total = 0;

    for (size_t i = 0; i < npc; i++) {
        total += pc[i].n;
    }
    if (total > FL_MAX_FLAGS_FILE_SIZE) {
        set_err(err, err_len, "the document would be larger than %u bytes",
                FL_MAX_FLAGS_FILE_SIZE);
        return FL_ERR_INVALID;
    }
    char *o = static_cast<char *>(alloc_bytes(a, total + 1));
    if (o == nullptr) {
        set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    }
    size_t at = 0;
    for (size_t i = 0; i < npc; i++) {
        if (pc[i].n != 0) {
            std::memcpy(o + at, pc[i].p, pc[i].n);
            at += pc[i].n;
        }
    }
    o[at] = '\0';
    *out = o;
    *out_len = at;
    return FL_OK;
}

fl_status_t put_flag(const char *doc, size_t len, const char *name,
    size_t name_len, const char *flag, size_t flag_len, const fl_alloc_t *a,
    char **out, size_t *out_len, char *err, size_t err_len)
{
    malloc_arena arena;
    jval *body = nullptr;

    if (name == nullptr) {
        name = "";
        name_len = 0;
    }
    if (flag == nullptr) {
        flag = "";
        flag_len = 0;
    }
    if (!utf8_valid(name, name_len)) {
        set_err(err, err_len, "flag name in the path is not valid UTF-8");
        return FL_ERR_FIELD;
    }

    fl_status_t rc = jparse(flag, flag_len, arena.handle(), doc_depth,
                            "request body", &body, err, err_len);
    if (rc != FL_OK) {
        return rc;
    }
    if (body->kind != J_OBJECT) {
        set_err(err, err_len, "request body must be a JSON object");
        return FL_ERR_JSON;
    }
    const jval *bn = jmember(body, "name", 4);
    if (bn != nullptr && bn->kind != J_STRING) {
        set_err(err, err_len, "\"name\" in the body must be a string");
        return FL_ERR_FIELD;
    }
    if (bn != nullptr && !is_named(body, name, name_len)) {
        set_err(err, err_len,
                "flag name \"%s\" in the body does not match \"%s\" in the path",
                shown(bn->str, bn->len).c_str(),
                shown(name, name_len).c_str());
        return FL_ERR_FIELD;
    }

    flags_array fa;
    rc = find_flags(doc, len, name, name_len, arena.handle(), &fa, err,
                    err_len);
    if (rc != FL_OK) {
        return rc;
    }

    /* the body's object, without the whitespace around it */
    size_t bb = skip_ws(flag, flag_len, 0);
    size_t be = flag_len;
    while (be > bb && yajl_space(static_cast<unsigned char>(flag[be - 1]))) {
        be--;
    }

    std::string head;             /* {"name":"...", when the body has none */
    piece obj[3];
    size_t nobj = 0;

    if (bn == nullptr) {
        head = "{\"name\":";
        append_str(head, name, name_len);
        if (body->count != 0) {
            head += ',';
        }
        obj[nobj++] = { head.data(), head.size() };
        obj[nobj++] = { flag + bb + 1, be - bb - 1 };
    } else {
        obj[nobj++] = { flag + bb, be - bb };
    }

    piece pc[8];
    size_t npc = 0;

    if (fa.found) {
        pc[npc++] = { doc, fa.m_b };
        for (size_t i = 0; i < nobj; i++) {
            pc[npc++] = obj[i];
        }
        pc[npc++] = { doc + fa.m_e, len - fa.m_e };
    } else if (fa.count == 0) {
        pc[npc++] = { doc, fa.open + 1 };
        for (size_t i = 0; i < nobj; i++) {
            pc[npc++] = obj[i];
        }
        pc[npc++] = { doc + fa.open + 1, len - fa.open - 1 };
    } else {
        pc[npc++] = { doc, fa.last_e };
        pc[npc++] = { ",", 1 };
        pc[npc++] = { doc + fa.last_ws, fa.last_b - fa.last_ws };
        for (size_t i = 0; i < nobj; i++) {
            pc[npc++] = obj[i];
        }
        pc[npc++] = { doc + fa.last_e, len - fa.last_e };
    }
    return join(pc, npc, a, out, out_len, err, err_len);
}

fl_status_t delete_flag(const char *doc, size_t len, const char *name,
    size_t name_len, const fl_alloc_t *a, char **out, size_t *out_len,
    int *found, char *err, size_t err_len)
{
    malloc_arena arena;
    flags_array fa;

    if (name == nullptr) {
        name = "";
        name_len = 0;
    }
    fl_status_t rc = find_flags(doc, len, name, name_len, arena.handle(),
                                &fa, err, err_len);
    if (rc != FL_OK) {
        return rc;
    }
    if (!fa.found) {
        return FL_OK;
    }

    piece pc[2];
    if (fa.count == 1) {
        pc[0] = { doc, fa.open + 1 };               /* [] */
        pc[1] = { doc + fa.close, len - fa.close };
    } else if (fa.has_next) {
        pc[0] = { doc, fa.m_b };                    /* up to the next */
        pc[1] = { doc + fa.next_b, len - fa.next_b };
    } else {
        pc[0] = { doc, fa.prev_e };                 /* the last: its comma */
        pc[1] = { doc + fa.m_e, len - fa.m_e };
    }
    rc = join(pc, 2, a, out, out_len, err, err_len);
    if (rc == FL_OK) {
        *found = 1;
    }
    return rc;
}

/* The header's "version": digits only, no leading zero, in [1, 2^64). */
bool version_of(const jval *v, uint64_t *out) noexcept
{
    if (v == nullptr || v->kind != J_NUMBER || v->len == 0 || v->len > 20
        || v->str[0] == '0')
    {
        return false;
    }
    uint64_t x = 0;
    for (size_t i = 0; i < v->len; i++) {
        unsigned char ch = static_cast<unsigned char>(v->str[i]);
        if (ch < '0' || ch > '9') {
            return false;
        }
        uint64_t dg = ch - '0';
        if (x > (UINT64_MAX - dg) / 10) {
            return false;
        }
        x = x * 10 + dg;
    }
    *out = x;
    return true;
}

/* s[0..len) without surrounding whitespace is one JSON object. */
bool one_object(const char *s, size_t len, size_t *b, size_t *e) noexcept
{
    size_t i = skip_ws(s, len, 0), j = len;

    while (j > i && yajl_space(static_cast<unsigned char>(s[j - 1]))) {
        j--;
    }
    if (i == j || s[i] != '{') {
        return false;
    }
    malloc_arena arena;
    jval *root = nullptr;
    jread_error er;
    json_read(s + i, j - i, arena.handle(), doc_depth, &root, &er);
    if (er.kind != jread_error::NONE || root == nullptr
        || root->kind != J_OBJECT)
    {
        return false;
    }
    *b = i;
    *e = j;
    return true;
}

} // namespace

} // namespace fl


extern "C" {

size_t fl_defs_diff(const fl_project_t *old, const fl_project_t *nw,
    fl_defs_change_t *out, size_t max) noexcept
{
    size_t k = 0;
    size_t nn = fl_project_flag_count(nw);
    size_t no = fl_project_flag_count(old);

    auto add = [&](fl_defs_kind_t kind, long o, long w) {
        if (k < max && out != nullptr) {
            out[k] = { kind, o, w };
        }
        k++;
    };

    for (size_t i = 0; i < nn; i++) {
        const fl::Flag &f = nw->flags[i];
        long j = fl_project_find_flag(old, f.name.data(), f.name.size());
        if (j < 0) {
            add(FL_DEFS_ADDED, -1, static_cast<long>(i));
        } else if (old->flags[static_cast<size_t>(j)].def_hash == f.def_hash) {
            add(FL_DEFS_SAME, j, static_cast<long>(i));
        } else {
            add(FL_DEFS_CHANGED, j, static_cast<long>(i));
        }
    }
    for (size_t j = 0; j < no; j++) {
        const fl::Flag &f = old->flags[j];
        if (fl_project_find_flag(nw, f.name.data(), f.name.size()) < 0) {
            add(FL_DEFS_REMOVED, static_cast<long>(j), -1);
        }
    }
    return k;
}

size_t fl_defs_answer_json_bound(const fl_project_t *old,
    const fl_project_t *nw, const fl_defs_change_t *c, size_t n) noexcept
{
    size_t b = sizeof("{\"version\":,,\"kept\":[],\"dryRun\":true}")
               + fl::u64_digits + fl::lists_bound(old, nw, c, n);

    for (size_t i = 0; i < n; i++) {
        const fl::Flag *f = fl::flag_of(old, nw, c[i]);
        if (c[i].kind == FL_DEFS_CHANGED && f != nullptr) {
            b += f->json_name.size() + fl::kept_fixed;
        }
    }
    return b;
}

size_t fl_defs_answer_json(const fl_project_t *old, const fl_project_t *nw,
    const fl_defs_change_t *c, size_t n, uint64_t version,
    const fl_control_t *const *old_ctl, int dry_run, char *out, size_t cap)
    noexcept
{
    if (out == nullptr || (c == nullptr && n != 0)
        || cap < fl_defs_answer_json_bound(old, nw, c, n))
    {
        return 0;
    }
    char *o = out;

    o = fl::put_lit(o, "{\"version\":");
    o += fl::put_u64(version, o);
    *o++ = ',';
    o = fl::put_lists(o, old, nw, c, n);
    o = fl::put_lit(o, ",\"kept\":[");

    bool first = true;
    for (size_t i = 0; i < n; i++) {
        const fl::Flag *f = fl::flag_of(old, nw, c[i]);
        if (c[i].kind != FL_DEFS_CHANGED || f == nullptr || old_ctl == nullptr
            || fl::flag_at(old, c[i].old_idx) == nullptr)
        {
            continue;
        }
        const fl_control_t *ctl = old_ctl[c[i].old_idx];
        if (ctl == nullptr) {
            continue;
        }
        fl_state_snapshot_t s;      /* one load of the control word */
        fl_state_snapshot(nullptr, ctl, 0, 0, 0, &s);
        if (!s.rolled_back && s.override_kind == FL_OVERRIDE_NONE) {
            continue;
        }
        if (!first) {
            *o++ = ',';
        }
        first = false;
        o = fl::put_lit(o, "{\"flag\":");
        std::memcpy(o, f->json_name.data(), f->json_name.size());
        o += f->json_name.size();
        o = s.rolled_back ? fl::put_lit(o, ",\"rolledBack\":true")
                          : fl::put_lit(o, ",\"rolledBack\":false");
        o = fl::put_lit(o, ",\"override\":");
        o = fl::put_override(o, s.override_kind, s.override_milli);
        *o++ = '}';
    }
    *o++ = ']';
    if (dry_run) {
        o = fl::put_lit(o, ",\"dryRun\":true");
    }
    *o++ = '}';
    return static_cast<size_t>(o - out);
}

fl_status_t fl_defs_put_flag(const char *doc, size_t len, const char *name,
    size_t name_len, const char *flag, size_t flag_len, const fl_alloc_t *a,
    char **out, size_t *out_len, char *err, size_t err_len) noexcept
{
    if (out == nullptr || out_len == nullptr) {
        return FL_ERR_INTERNAL;
    }
    *out = nullptr;
    *out_len = 0;
    if (doc == nullptr) {
        doc = "";
        len = 0;
    }
    try {
        return fl::put_flag(doc, len, name, name_len, flag, flag_len, a, out,
                            out_len, err, err_len);
    } catch (...) {
        fl::set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    }
}

fl_status_t fl_defs_delete_flag(const char *doc, size_t len,
    const char *name, size_t name_len, const fl_alloc_t *a, char **out,
    size_t *out_len, int *found, char *err, size_t err_len) noexcept
{
    if (out == nullptr || out_len == nullptr || found == nullptr) {
        return FL_ERR_INTERNAL;
    }
    *out = nullptr;
    *out_len = 0;
    *found = 0;
    if (doc == nullptr) {
        doc = "";
        len = 0;
    }
    try {
        return fl::delete_flag(doc, len, name, name_len, a, out, out_len,
                               found, err, err_len);
    } catch (...) {
        fl::set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    }
}

size_t fl_defs_entry_json_bound(size_t by_len, size_t host_len,
    const fl_project_t *old, const fl_project_t *nw,
    const fl_defs_change_t *c, size_t n) noexcept
{
    /* 20: the time and its 'Z'; 8: room for two nulls */
    return sizeof("{\"version\":,\"at\":\"\",\"by\":,\"host\":,}")
           + fl::u64_digits + 20 + 8 + fl::str_bound(by_len)
           + fl::str_bound(host_len) + fl::lists_bound(old, nw, c, n);
}

size_t fl_defs_entry_json(uint64_t version, uint64_t at_ms, const char *by,
    size_t by_len, const char *host, size_t host_len,
    const fl_project_t *old, const fl_project_t *nw,
    const fl_defs_change_t *c, size_t n, char *out, size_t cap) noexcept
{
    if (by == nullptr) {
        by_len = 0;
    }
    if (host == nullptr) {
        host_len = 0;
    }
    if (out == nullptr || (c == nullptr && n != 0)
        || cap < fl_defs_entry_json_bound(by_len, host_len, old, nw, c, n))
    {
        return 0;
    }
    char *o = out;
    char t[24];

    o = fl::put_lit(o, "{\"version\":");
    o += fl::put_u64(version, o);
    o = fl::put_lit(o, ",\"at\":\"");
    fl_format_time_ms(at_ms, t);            /* whole seconds: no ".mmm" */
    std::memcpy(o, t, 19);
    o += 19;
    o = fl::put_lit(o, "Z\",\"by\":");
    o = by != nullptr ? fl::put_str(o, by, by_len) : fl::put_lit(o, "null");
    o = fl::put_lit(o, ",\"host\":");
    o = host != nullptr ? fl::put_str(o, host, host_len)
                        : fl::put_lit(o, "null");
    *o++ = ',';
    o = fl::put_lists(o, old, nw, c, n);
    *o++ = '}';
    return static_cast<size_t>(o - out);
}

fl_status_t fl_defs_file_parse(const char *buf, size_t len,
    uint64_t *version, size_t *entry_len, size_t *doc_off, char *err,
    size_t err_len) noexcept
{
    if (version == nullptr || entry_len == nullptr || doc_off == nullptr) {
        return FL_ERR_INTERNAL;
    }
    if (buf == nullptr) {
        buf = "";
        len = 0;
    }
    const char *nl = static_cast<const char *>(std::memchr(buf, '\n', len));
    if (nl == nullptr) {
        fl::set_err(err, err_len, "no header line");
        return FL_ERR_INVALID;
    }
    size_t hl = static_cast<size_t>(nl - buf);
    if (fl::skip_ws(buf, hl, 0) == hl) {
        fl::set_err(err, err_len, "header is empty");
        return FL_ERR_INVALID;
    }

    fl::malloc_arena arena;
    fl::jval *root = nullptr;
    fl::jread_error e;
    fl::json_read(buf, hl, arena.handle(), fl::doc_depth, &root, &e);
    switch (e.kind) {
    case fl::jread_error::NONE:
        break;
    case fl::jread_error::NOMEM:
        fl::set_err(err, err_len, "out of memory");
        return FL_ERR_NOMEM;
    case fl::jread_error::TOO_DEEP:
        fl::set_err(err, err_len, "header is not valid JSON: nesting deeper"
                    " than %u levels", fl::doc_depth);
        return FL_ERR_INVALID;
    default:
        fl::set_err(err, err_len, "header is not valid JSON: %s", e.why);
        return FL_ERR_INVALID;
    }
    if (root == nullptr || root->kind != fl::J_OBJECT) {
        fl::set_err(err, err_len, "header is not a JSON object");
        return FL_ERR_INVALID;
    }
    uint64_t v = 0;
    if (!fl::version_of(fl::jmember(root, "version", 7), &v)) {
        fl::set_err(err, err_len, "header has no \"version\" of at least 1");
        return FL_ERR_INVALID;
    }
    if (fl::skip_ws(buf, len, hl + 1) == len) {
        fl::set_err(err, err_len, "no document after the header");
        return FL_ERR_INVALID;
    }
    *version = v;
    *entry_len = hl;
    *doc_off = hl + 1;
    return FL_OK;
}

size_t fl_defs_history_json_bound(const size_t *lens, size_t n) noexcept
{
    size_t b = sizeof("{\"versions\":[]}");

    if (lens == nullptr) {
        return b;
    }
    for (size_t i = 0; i < n; i++) {
        b += lens[i] + 1;
    }
    return b;
}

size_t fl_defs_history_json(const char *const *entries, const size_t *lens,
    size_t n, char *out, size_t cap) noexcept
{
    if (out == nullptr || ((entries == nullptr || lens == nullptr) && n != 0)
        || cap < fl_defs_history_json_bound(lens, n))
    {
        return 0;
    }
    char *o = out;
    bool first = true;

    o = fl::put_lit(o, "{\"versions\":[");
    for (size_t i = 0; i < n; i++) {
        size_t b, e;
        if (entries[i] == nullptr || !fl::one_object(entries[i], lens[i], &b, &e)) {
            continue;
        }
        if (!first) {
            *o++ = ',';
        }
        first = false;
        std::memcpy(o, entries[i] + b, e - b);
        o += e - b;
    }
    o = fl::put_lit(o, "]}");
    return static_cast<size_t>(o - out);
}

} // extern "C"
