/*
 * fuzz_defs.cc - the text editing and file reading of runtime definitions
 * (src/core/definitions.cpp): fl_defs_put_flag, fl_defs_delete_flag,
 * fl_defs_file_parse and fl_defs_history_json.
 *
 * Input: DOC, then optionally NUL BODY, then optionally NUL NAME (absent
 * parts: body {} and name f), so seeds stay plain documents.
 *  - the whole input is read as a version file; on FL_OK its header line
 *    ends where it says and a document follows;
 *  - the input's lines are given to fl_defs_history_json, whose answer
 *    must fit its bound and be valid JSON;
 *  - BODY is put into DOC under NAME: on FL_OK the result is valid JSON,
 *    NUL-terminated, and putting the same body again gives the same
 *    bytes; deleting NAME from it finds the flag and leaves valid JSON;
 *  - NAME is deleted from DOC: on FL_OK with found, valid JSON.
 * Every error must come with a one-line message.
 */

#include "fuzz_common.h"

namespace {

constexpr fl_status_t known[] = { FL_ERR_INVALID, FL_ERR_JSON, FL_ERR_FIELD,
                                  FL_ERR_NOMEM };

void check_error(fl_status_t rc, const char *err, size_t err_len,
    const char *what)
{
    bool ok = false;
    for (fl_status_t k : known) {
        ok = ok || rc == k;
    }
    FUZZ_CHECK(ok, "%s returned %d: %s", what, static_cast<int>(rc), err);
    fuzz::check_message(err, err_len, what);
}

void check_file(const char *d, size_t n)
{
    uint64_t v = 0;
    size_t el = 0, off = 0;
    char err[256];
    std::memset(err, 'x', sizeof(err));

    fl_status_t rc = fl_defs_file_parse(d, n, &v, &el, &off, err, sizeof(err));
    if (rc != FL_OK) {
        check_error(rc, err, sizeof(err), "file_parse");
        return;
    }
    FUZZ_CHECK(v >= 1, "version %llu", static_cast<unsigned long long>(v));
    FUZZ_CHECK(el < n && d[el] == '\n' && off == el + 1 && off < n,
               "entry_len %zu doc_off %zu of %zu", el, off, n);
    FUZZ_CHECK(std::memchr(d, '\n', el) == nullptr, "header has a newline");
}

void check_history(const char *d, size_t n)
{
    const char *entries[16];
    size_t lens[16];
    size_t k = 0, at = 0;

    while (at <= n && k < 16) {
        const char *nl = static_cast<const char *>(std::memchr(d + at, '\n', n - at));
        size_t end = nl ? static_cast<size_t>(nl - d) : n;
        entries[k] = (k == 3) ? nullptr : d + at;
        lens[k] = end - at;
        k++;
        at = end + 1;
    }
    size_t bound = fl_defs_history_json_bound(lens, k);
    char *buf = static_cast<char *>(std::malloc(bound));
    FUZZ_CHECK(buf != nullptr, "malloc");
    size_t w = fl_defs_history_json(entries, lens, k, buf, bound);
    FUZZ_CHECK(w > 0 && w <= bound, "history wrote %zu, bound %zu", w, bound);
    FUZZ_CHECK(fuzz::json_valid(buf, w), "history is not valid JSON: %.*s",
               static_cast<int>(w), buf);
    FUZZ_CHECK(fl_defs_history_json(entries, lens, k, buf, bound - 1) == 0,
               "history wrote into less than its bound");
    std::free(buf);
}

void check_edit(const char *doc, size_t dn, const char *body, size_t bn,
    const char *name, size_t nn, fuzz::Arena &arena)
{
    char *out = nullptr;
    size_t out_len = 0;
    char err[256];
    std::memset(err, 'x', sizeof(err));

    fl_status_t rc = fl_defs_put_flag(doc, dn, name, nn, body, bn,
                                      arena.handle(), &out, &out_len, err,
                                      sizeof(err));
    if (rc != FL_OK) {
        check_error(rc, err, sizeof(err), "put_flag");
        FUZZ_CHECK(out == nullptr && out_len == 0, "put_flag: output on error");
    } else {
        FUZZ_CHECK(out != nullptr && out[out_len] == '\0', "put_flag: output");
        FUZZ_CHECK(fuzz::json_valid(out, out_len), "put result is not JSON: %.*s",
                   static_cast<int>(out_len), out);

        char *again = nullptr;
        size_t again_len = 0;
        rc = fl_defs_put_flag(out, out_len, name, nn, body, bn, arena.handle(),
                              &again, &again_len, err, sizeof(err));
        FUZZ_CHECK(rc == FL_OK && again_len == out_len
                   && std::memcmp(again, out, out_len) == 0,
                   "the same put twice differs (%d %s)", static_cast<int>(rc),
                   rc == FL_OK ? "" : err);

        int found = 0;
        char *del = nullptr;
        size_t del_len = 0;
        rc = fl_defs_delete_flag(out, out_len, name, nn, arena.handle(), &del,
                                 &del_len, &found, err, sizeof(err));
        FUZZ_CHECK(rc == FL_OK && found == 1, "put flag not found (%d %s)",
                   static_cast<int>(rc), rc == FL_OK ? "" : err);
        FUZZ_CHECK(fuzz::json_valid(del, del_len),
                   "delete result is not JSON: %.*s", static_cast<int>(del_len),
                   del);
    }

    int found = -1;
    out = nullptr;
    out_len = 0;
    rc = fl_defs_delete_flag(doc, dn, name, nn, arena.handle(), &out, &out_len,
                             &found, err, sizeof(err));
    if (rc != FL_OK) {
        check_error(rc, err, sizeof(err), "delete_flag");
        FUZZ_CHECK(found == 0 && out == nullptr, "delete_flag: output on error");
        return;
    }
    if (found == 0) {
        FUZZ_CHECK(out == nullptr && out_len == 0, "delete_flag: output, not found");
        return;
    }
    FUZZ_CHECK(found == 1 && out != nullptr && out[out_len] == '\0'
               && out_len < dn, "delete_flag: output");
    FUZZ_CHECK(fuzz::json_valid(out, out_len), "delete result is not JSON: %.*s",
               static_cast<int>(out_len), out);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz::Exact whole(data, size);
    const char *d = whole.p;

    check_file(d, size);
    check_history(d, size);

    /* DOC \0 BODY \0 NAME */
    const char *z1 = static_cast<const char *>(std::memchr(d, '\0', size));
    size_t dn = z1 ? static_cast<size_t>(z1 - d) : size;
    const char *body = "{}";
    size_t bn = 2;
    const char *name = "f";
    size_t nn = 1;
    if (z1 != nullptr) {
        body = z1 + 1;
        size_t rest = size - dn - 1;
        const char *z2 = static_cast<const char *>(std::memchr(body, '\0', rest));
        bn = z2 ? static_cast<size_t>(z2 - body) : rest;
        if (z2 != nullptr) {
            name = z2 + 1;
            nn = rest - bn - 1;
        }
    }

    fuzz::Arena arena;
    check_edit(d, dn, body, bn, name, nn, arena);
    return 0;
}
