/*
 * variables.cpp - the rules behind $flag_NAME and flags_context
 * (docs/variables.md): a flag's variable name, the lookup of a variable
 * name in a project, the collisions of a project, and the caller built
 * from the values flags_context computes, with the limits of
 * fl_parse_query().
 */

#include "flags_core.h"
#include "text.hpp"

#include <algorithm>
#include <cstring>

namespace {

/* One byte of a variable name: nginx lowercases variable names, so the
 * name of a flag is lowercased too; '-', '.' and ':' cannot be written in
 * a variable name and become '_'. */
inline char var_byte(char c) noexcept
{
    if (c >= 'A' && c <= 'Z') {
        return static_cast<char>(c - 'A' + 'a');
    }
    if (c == '-' || c == '.' || c == ':') {
        return '_';
    }
    return c;
}

/* Whether flag name n (len nl) maps to the variable name v (len vl); v is
 * compared through var_byte() too, so either case of v matches. */
bool var_equal(const char *n, size_t nl, const char *v, size_t vl) noexcept
{
    if (nl != vl) {
        return false;
    }
    for (size_t i = 0; i < nl; i++) {
        if (var_byte(n[i]) != var_byte(v[i])) {
            return false;
        }
    }
    return true;
}

bool has_nul(const char *s, size_t len) noexcept
{
    return len != 0 && std::memchr(s, '\0', len) != nullptr;
}

} // namespace

extern "C" {

size_t fl_flag_var_name(const char *name, size_t len, char *out) noexcept
{
    for (size_t i = 0; i < len; i++) {
        out[i] = var_byte(name[i]);
    }
    return len;
}

long fl_project_find_var(const fl_project_t *p, const char *name,
    size_t len) noexcept
{
    size_t n = fl_project_flag_count(p);

    for (size_t i = 0; i < n; i++) {
        fl_flag_info_t info;
        if (fl_project_flag_info(p, i, &info) == 0
            && var_equal(info.name, info.name_len, name, len))
        {
            return static_cast<long>(i);
        }
    }
    return -1;
}

int fl_project_var_collision(const fl_project_t *p, size_t *first,
    size_t *second) noexcept
{
    size_t n = fl_project_flag_count(p);

    /* quadratic, but once per project and nginx -t: at 1000 flags half a
     * million short comparisons, most ending at the length */
    for (size_t j = 1; j < n; j++) {
        fl_flag_info_t b;
        if (fl_project_flag_info(p, j, &b) != 0) {
            continue;
        }
        for (size_t i = 0; i < j; i++) {
            fl_flag_info_t a;
            if (fl_project_flag_info(p, i, &a) == 0
                && var_equal(a.name, a.name_len, b.name, b.name_len))
            {
                *first = i;
                *second = j;
                return 1;
            }
        }
    }
    return 0;
}

fl_status_t fl_user_from_values(const char *user_id, size_t user_id_len,
    const fl_trait_t *traits, size_t ntraits, size_t max_traits,
    const fl_alloc_t *a, fl_user_t *out, char *err, size_t err_len) noexcept
{
    if (out == nullptr) {
        return FL_ERR_INTERNAL;
    }
    *out = fl_user_t{nullptr, 0, nullptr, 0};

    if (user_id_len > FL_MAX_VALUE_LEN) {
        fl::set_err(err, err_len, "userId is longer than %u bytes",
                    FL_MAX_VALUE_LEN);
        return FL_ERR_QUERY;
    }
    if (has_nul(user_id, user_id_len)) {
        fl::set_err(err, err_len, "a NUL byte in userId");
        return FL_ERR_QUERY;
    }

    size_t present = 0;
    for (size_t i = 0; i < ntraits; i++) {
        const fl_trait_t &t = traits[i];
        if (t.name_len == 0 || t.name_len > FL_MAX_TRAIT_NAME_LEN
            || has_nul(t.name, t.name_len))
        {
            fl::set_err(err, err_len, "an invalid trait name");
            return FL_ERR_QUERY;
        }
        if (t.value_len > FL_MAX_VALUE_LEN) {
            fl::set_err(err, err_len, "trait \"%.*s\" is longer than %u bytes",
                        static_cast<int>(std::min<size_t>(t.name_len, 64)),
                        t.name, FL_MAX_VALUE_LEN);
            return FL_ERR_QUERY;
        }
        if (has_nul(t.value, t.value_len)) {
            fl::set_err(err, err_len, "a NUL byte in trait \"%.*s\"",
                        static_cast<int>(std::min<size_t>(t.name_len, 64)),
                        t.name);
            return FL_ERR_QUERY;
        }
        present += t.value_len != 0;
    }

    if (present > max_traits) {
        fl::set_err(err, err_len, "more than %zu traits", max_traits);
        return FL_ERR_QUERY;
    }

    fl_trait_t *copy = nullptr;
    if (present != 0) {
        if (a == nullptr || a->alloc == nullptr) {
            return FL_ERR_INTERNAL;
        }
        copy = static_cast<fl_trait_t *>(
            a->alloc(a->ctx, present * sizeof(fl_trait_t)));
        if (copy == nullptr) {
            fl::set_err(err, err_len, "out of memory");
            return FL_ERR_NOMEM;
        }
        size_t k = 0;
        for (size_t i = 0; i < ntraits; i++) {
            if (traits[i].value_len != 0) {
                copy[k++] = traits[i];
            }
        }
        /* insertion sort: a handful of traits, and no exception */
        for (size_t i = 1; i < present; i++) {
            fl_trait_t t = copy[i];
            size_t j = i;
            while (j > 0
                   && fl::bytes_cmp(copy[j - 1].name, copy[j - 1].name_len,
                                    t.name, t.name_len) > 0)
            {
                copy[j] = copy[j - 1];
                j--;
            }
            copy[j] = t;
        }
        for (size_t i = 1; i < present; i++) {
            if (fl::bytes_cmp(copy[i - 1].name, copy[i - 1].name_len,
                              copy[i].name, copy[i].name_len) == 0)
            {
                fl::set_err(err, err_len, "trait \"%.*s\" is given twice",
                            static_cast<int>(std::min<size_t>(
                                copy[i].name_len, 64)), copy[i].name);
                return FL_ERR_QUERY;
            }
        }
    }

    out->user_id = user_id_len ? user_id : nullptr;
    out->user_id_len = user_id_len;
    out->traits = copy;
    out->ntraits = present;
    return FL_OK;
}

} // extern "C"
