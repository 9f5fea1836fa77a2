/*
 * fuzz_query.cc - fl_parse_query, the caller of GET {loc}flags/<project>.
 *
 * Input: the first byte is max_traits (0..255), the rest the raw query
 * string.  Besides the sanitizers, the result is checked against a plain
 * reference decoder written here from the contract in flags_core.h
 * (std::map, last occurrence wins), and fl_user_trait must find every
 * trait and agree with a linear search for a few other names.
 */

#include "fuzz_common.h"

#include <map>
#include <string>

namespace {

int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* false: malformed escape or decoded NUL */
bool ref_decode(const std::string &in, std::string &out)
{
    out.clear();
    for (size_t i = 0; i < in.size(); i++) {
        unsigned char c = static_cast<unsigned char>(in[i]);
        if (c == '%') {
            if (i + 2 >= in.size()) {         /* "%" or "%4" at the end */
                return false;
            }
            int hi = hexval(static_cast<unsigned char>(in[i + 1]));
            int lo = hexval(static_cast<unsigned char>(in[i + 2]));
            if (hi < 0 || lo < 0) {
                return false;
            }
            c = static_cast<unsigned char>(hi * 16 + lo);
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }
        if (c == 0) {
            return false;
        }
        out.push_back(static_cast<char>(c));
    }
    return true;
}

struct Ref {
    bool                                ok = true;
    bool                                has_user = false;
    std::string                         user;
    std::map<std::string, std::string>  traits;     /* bytewise order */
};

Ref reference(const std::string &q, size_t max_traits)
{
    Ref r;
    size_t start = 0;

    while (start <= q.size()) {
        size_t amp = q.find('&', start);
        if (amp == std::string::npos) {
            amp = q.size();
        }
        std::string piece = q.substr(start, amp - start);
        start = amp + 1;
        if (piece.empty()) {
            continue;
        }
        size_t eq = piece.find('=');
        std::string rn = piece.substr(0, eq);
        std::string rv = eq == std::string::npos ? "" : piece.substr(eq + 1);
        std::string n, v;
        if (!ref_decode(rn, n) || !ref_decode(rv, v)) {
            r.ok = false;
            return r;
        }
        if (n == "userId") {
            if (v.size() > FL_MAX_VALUE_LEN) {
                r.ok = false;
                return r;
            }
            r.has_user = !v.empty();
            r.user = v;
        } else if (n.compare(0, 6, "trait_") == 0 && n.size() >= 6) {
            std::string tn = n.substr(6);
            if (tn.empty() || tn.size() > FL_MAX_TRAIT_NAME_LEN
                || v.size() > FL_MAX_VALUE_LEN)
            {
                r.ok = false;
                return r;
            }
            r.traits[tn] = v;
        }
    }
    if (r.traits.size() > max_traits) {
        r.ok = false;
    }
    return r;
}

int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    size_t n = an < bn ? an : bn;
    int c = n ? std::memcmp(a, b, n) : 0;
    if (c != 0) return c;
    return an < bn ? -1 : an > bn ? 1 : 0;
}

const fl_trait_t *linear(const fl_user_t *u, const char *name, size_t len)
{
    for (size_t i = 0; i < u->ntraits; i++) {
        if (name_cmp(u->traits[i].name, u->traits[i].name_len, name, len) == 0) {
            return &u->traits[i];
        }
    }
    return nullptr;
}

void lookup(const fl_user_t *u, const char *name, size_t len)
{
    const fl_trait_t *a = fl_user_trait(u, name, len);
    const fl_trait_t *b = linear(u, name, len);
    FUZZ_CHECK(a == b, "fl_user_trait(\"%.*s\") disagrees with a linear search",
               static_cast<int>(len), name);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    size_t max_traits = data[0];
    const char *q = reinterpret_cast<const char *>(data + 1);
    size_t len = size - 1;

    fuzz::Arena arena;
    fl_user_t u;
    char err[256];
    std::memset(err, 'x', sizeof(err));

    fl_status_t rc = fl_parse_query(q, len, max_traits, arena.handle(), &u,
                                    err, sizeof(err));
    FUZZ_CHECK(rc == FL_OK || rc == FL_ERR_QUERY, "fl_parse_query returned %d",
               static_cast<int>(rc));

    Ref ref = reference(std::string(q, len), max_traits);
    FUZZ_CHECK((rc == FL_OK) == ref.ok,
               "status %d, the reference decoder says %s", static_cast<int>(rc),
               ref.ok ? "ok" : "invalid");

    if (rc != FL_OK) {
        fuzz::check_message(err, sizeof(err), "query");
        FUZZ_CHECK(u.user_id == nullptr && u.traits == nullptr && u.ntraits == 0,
                   "output not cleared on error");
        return 0;
    }

    /* userId: NULL when absent or empty, bounded */
    FUZZ_CHECK((u.user_id == nullptr) == (u.user_id_len == 0),
               "user_id %p with length %zu", static_cast<const void *>(u.user_id),
               u.user_id_len);
    FUZZ_CHECK(u.user_id_len <= FL_MAX_VALUE_LEN, "userId of %zu bytes",
               u.user_id_len);
    FUZZ_CHECK(u.user_id == nullptr
               || std::memchr(u.user_id, '\0', u.user_id_len) == nullptr,
               "NUL in userId");
    FUZZ_CHECK(ref.has_user == (u.user_id != nullptr)
               && (!ref.has_user
                   || ref.user == std::string(u.user_id, u.user_id_len)),
               "userId differs from the reference");

    /* traits: sorted, unique, within limits, as the reference has them */
    FUZZ_CHECK(u.ntraits <= max_traits, "%zu traits over max %zu", u.ntraits,
               max_traits);
    FUZZ_CHECK((u.traits == nullptr) == (u.ntraits == 0), "traits/ntraits");
    FUZZ_CHECK(u.ntraits == ref.traits.size(), "%zu traits, reference %zu",
               u.ntraits, ref.traits.size());
    auto it = ref.traits.begin();
    for (size_t i = 0; i < u.ntraits; i++, ++it) {
        const fl_trait_t &t = u.traits[i];
        FUZZ_CHECK(t.name != nullptr && t.name_len >= 1
                   && t.name_len <= FL_MAX_TRAIT_NAME_LEN,
                   "trait %zu: name length %zu", i, t.name_len);
        FUZZ_CHECK(t.value_len <= FL_MAX_VALUE_LEN && (t.value || !t.value_len),
                   "trait %zu: value length %zu", i, t.value_len);
        FUZZ_CHECK(std::memchr(t.name, '\0', t.name_len) == nullptr
                   && (t.value_len == 0
                       || std::memchr(t.value, '\0', t.value_len) == nullptr),
                   "trait %zu: NUL byte", i);
        if (i > 0) {
            const fl_trait_t &p = u.traits[i - 1];
            FUZZ_CHECK(name_cmp(p.name, p.name_len, t.name, t.name_len) < 0,
                       "traits %zu and %zu not sorted / unique", i - 1, i);
        }
        FUZZ_CHECK(it->first == std::string(t.name, t.name_len)
                   && it->second == std::string(t.value ? t.value : "",
                                                t.value_len),
                   "trait %zu differs from the reference", i);
        FUZZ_CHECK(fl_user_trait(&u, t.name, t.name_len) == &t,
                   "fl_user_trait does not find trait %zu", i);
    }

    /* absent names, prefixes, names from the input */
    static const char *const names[] = { "plan", "country", "", "a", "zzzz",
                                         "\xff", "plan\x01" };
    for (const char *n : names) {
        lookup(&u, n, std::strlen(n));
    }
    for (size_t i = 0; i < u.ntraits; i++) {
        const fl_trait_t &t = u.traits[i];
        lookup(&u, t.name, t.name_len - 1);             /* a prefix */
        std::string longer(t.name, t.name_len);
        longer.push_back('\0');
        lookup(&u, longer.data(), longer.size());
    }
    lookup(&u, q, len < 16 ? len : 16);
    FUZZ_CHECK(fl_user_trait(nullptr, "a", 1) == nullptr, "NULL user");
    return 0;
}
