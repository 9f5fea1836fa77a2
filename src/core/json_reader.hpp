/*
 * json_reader.hpp - the core's JSON tree reader (internal, not part of the
 * C API), shared by the flags file loader, the admin override body and the
 * state file.  The error report body has a streaming parser of its own
 * (report.cpp) but reads the same value kinds.
 *
 * The tree lives in an fl_alloc_t (a request pool or a malloc_arena) and
 * is never freed node by node.  yajl_tree is not used: it has no depth
 * limit and frees recursively, so a hostile "[[[[..." could exhaust the
 * stack, and it hides the byte offset a syntax error message needs.
 *
 *  - Nesting deeper than the caller's limit stops the parse at once.
 *  - Duplicate keys are all kept in document order; jmember() and jget()
 *    return the last one (the last one wins, as in JavaScript).
 *  - Strings are yajl's decoded bytes, NUL-terminated copies that may also
 *    hold NUL bytes (use len); a number keeps its text.
 */

#ifndef FLAGS_JSON_READER_HPP
#define FLAGS_JSON_READER_HPP

#include "flags_core.h"

#include <yajl/yajl_parse.h>

#include <cstddef>
#include <cstdint>

namespace fl {

/* The kind of a JSON value, for the tree reader and the report parser. */
enum jkind : unsigned char {
    J_NULL, J_FALSE, J_TRUE, J_NUMBER, J_STRING, J_OBJECT, J_ARRAY
};

struct jval {
    jkind        kind;
    const char  *str;       /* J_STRING: decoded; J_NUMBER: its text */
    size_t       len;
    const char  *key;       /* member name inside an object */
    size_t       key_len;
    jval        *parent;
    jval        *first;     /* children in document order */
    jval        *last;
    jval        *next;
    size_t       count;
};

/* for (const jval &m : children(obj)): members or elements in document
 * order. */
struct jchildren {
    struct iterator {
        const jval *v;
        const jval &operator*() const noexcept { return *v; }
        iterator &operator++() noexcept { v = v->next; return *this; }
        bool operator!=(const iterator &o) const noexcept { return v != o.v; }
    };
    const jval *first;
    iterator begin() const noexcept { return {first}; }
    iterator end() const noexcept { return {nullptr}; }
};

inline jchildren children(const jval &v) noexcept
{
    return {v.first};
}

/* The last member named key (key_len bytes), null values included, or
 * nullptr. */
const jval *jmember(const jval *obj, const char *key, size_t key_len) noexcept;

/* The last member named key (a C string); a null value reads as absent. */
const jval *jget(const jval *obj, const char *key) noexcept;

inline bool json_space(unsigned char c) noexcept
{
    /* one compare decides every byte above ' ', which is most of a JSON
     * text (compact JSON has no space between tokens) */
    constexpr uint64_t space = 1ull << ' ' | 1ull << '\t' | 1ull << '\n'
                               | 1ull << '\r';

    return c <= ' ' && (space >> c & 1) != 0;
}

/* What yajl skips between tokens: JSON's whitespace and also \v and \f.
 * Whoever walks a text yajl accepted (json_skip_value) must skip these. */
inline bool yajl_space(unsigned char c) noexcept
{
    return json_space(c) || c == '\v' || c == '\f';
}

/* yajl's current error as one line without a trailing space ("syntax
 * error" when yajl has none). */
void yajl_error_text(yajl_handle h, char *out, size_t out_len) noexcept;

struct jread_error {
    enum kind_t { NONE, NOMEM, TOO_DEEP, SYNTAX } kind;
    size_t      consumed;       /* yajl's bytes consumed by the parse */
    bool        at_end;         /* the error came at the end of input */
    char        why[128];       /* SYNTAX: yajl's reason */
};

/* Parses data[0..len) into a tree in a's memory (yajl's buffers too).
 * *root is nullptr unless the whole text is one valid value.  yajl takes
 * a value followed by an unterminated string ({}"x) for a complete text
 * (the string could still be going on); that is a SYNTAX error here,
 * "parse error: trailing garbage" at the string's quote, as the same
 * value followed by any other token is. */
void json_read(const char *data, size_t len, const fl_alloc_t *a,
    unsigned max_depth, jval **root, jread_error *e) noexcept;

/* p on the first byte of a value in a text yajl accepted (the caller
 * checked it): the offset just after that value (a string's closing
 * quote, a container's closing bracket, a number's or literal's last
 * byte).  Containers are skipped by counting brackets outside strings,
 * without recursion; nothing is read at or past len (len when the value
 * runs to the end). */
size_t json_skip_value(const char *data, size_t len, size_t p) noexcept;

/* The index of the first byte that a validating parser refuses (len for a
 * premature end), found by feeding data one byte at a time: yajl's own
 * offset is sometimes past the token at fault and sometimes before it. */
size_t json_error_offset(const char *data, size_t len) noexcept;

/*
 * json_read() with the messages of the override body and the state file:
 * subject names the input ("request body", "state file").  FL_ERR_JSON for
 * an empty input ("%s is empty"), a syntax error ("%s is not valid JSON:
 * <reason> (near byte N)") or nesting deeper than max_depth ("JSON nesting
 * is deeper than N levels"); FL_ERR_NOMEM.
 */
fl_status_t jparse(const char *data, size_t len, const fl_alloc_t *a,
    unsigned max_depth, const char *subject, jval **root,
    char *err, size_t err_len) noexcept;

/* An override object, {"enabled": false} or {"rolloutPercentage": N}:
 * FL_OK, or FL_ERR_FIELD with a message naming the field.  Shared by the
 * admin PUT body and the state file; defined in override.cpp. */
fl_status_t override_from_json(const jval *obj, fl_override_kind_t *kind,
    uint32_t *milli, char *err, size_t err_len) noexcept;

/* A caller from a userId and a traits object (either nullptr: absent or
 * null), as the SDK's body reads them, with the limits of fl_parse_query;
 * where prefixes the member names in messages.  FL_ERR_FIELD with a
 * message.  Shared by the SDK's bodies and the report's cohort; defined
 * in sdk.cpp. */
fl_status_t user_from_json(const jval *uid, const jval *traits,
    size_t max_traits, const fl_alloc_t *a, const char *where,
    fl_user_t *out, char *err, size_t err_len) noexcept;

} // namespace fl

#endif /* FLAGS_JSON_READER_HPP */
