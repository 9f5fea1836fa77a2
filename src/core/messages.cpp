/*
 * messages.cpp - the module's small fixed-shape JSON messages: the error
 * body every handler answers with (docs/http-api.md), the same error sent
 * on a WebSocket, and the OFREP event-stream event (docs/push.md).
 */

#include "flags_core.h"
#include "json_writer.hpp"

#include <cstdio>
#include <cstring>

namespace {

constexpr char error_head[] = "{\"error\":\"";
constexpr char typed_error_head[] = "{\"type\":\"error\",\"error\":\"";
constexpr char message_member[] = "\",\"message\":";

} // namespace

extern "C" {

size_t fl_error_json_bound(size_t code_len, size_t message_len) noexcept
{
    return sizeof(typed_error_head) + code_len + sizeof(message_member)
           + fl::str_bound(message_len) + 1;
}

size_t fl_error_json(int typed, const char *code, const char *message,
    size_t message_len, char *buf) noexcept
{
    char *o = buf;
    size_t code_len = std::strlen(code);

    if (typed) {
        o = fl::put_lit(o, typed_error_head);
    } else {
        o = fl::put_lit(o, error_head);
    }
    std::memcpy(o, code, code_len);
    o += code_len;
    o = fl::put_lit(o, message_member);
    o = fl::put_str(o, message, message_len);
    *o++ = '}';
    return static_cast<size_t>(o - buf);
}

size_t fl_sse_changed_event(uint64_t seq, char *buf) noexcept
{
    int n = std::snprintf(buf, FL_SSE_EVENT_MAX,
                          "data: {\"type\":\"changed\",\"seq\":%llu}\n\n",
                          static_cast<unsigned long long>(seq));
    return n < 0 ? 0 : static_cast<size_t>(n);
}

size_t fl_sse_refetch_event(uint64_t version, char *buf) noexcept
{
    int n = std::snprintf(buf, FL_SSE_EVENT_MAX,
                          "data: {\"type\":\"refetchEvaluation\","
                          "\"etag\":\"%llu\"}\n\n",
                          static_cast<unsigned long long>(version));
    return n < 0 ? 0 : static_cast<size_t>(n);
}

} // extern "C"
