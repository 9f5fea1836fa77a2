/*
 * json_scan.hpp - the one-buffer fast path in front of yajl (internal).
 *
 * The error report is the module's hottest body, and yajl's byte-at-a-time
 * lexer costs more per report than the rest of the module together (about
 * 7k instructions for a 330-byte report).  json_scan() reads a JSON text
 * held whole in one buffer and drives the very same yajl_callbacks a
 * yajl_handle would, so the report's rules stay in one place (report.cpp).
 *
 * It handles a strict subset of what yajl accepts and declines the rest:
 * any syntax error, a control byte in a string, an escape yajl would
 * refuse, \u0000, an unpaired surrogate escape, trailing bytes, nesting
 * deeper than FL_REPORT_MAX_DEPTH, a callback that stops the parse, an
 * empty text.  On JSON_SCAN_DECLINED the caller throws away whatever the
 * callbacks built and gives the same bytes to yajl, which then decides,
 * and words any error, exactly as before.  So for every input the outcome
 * is yajl's; the fuzz target fuzz_report.cc checks that both ways agree.
 *
 * What it passes to the callbacks is what yajl passes: strings decoded
 * (escapes resolved, \uD83D\uDE00 pairs as one 4-byte UTF-8 sequence),
 * numbers as their text (only the yajl_number callback is used), keys
 * through yajl_map_key.  Bytes >= 0x80 are passed through unchecked: the
 * caller runs the strict UTF-8 check (utf8.hpp) over the text first.
 */

#ifndef FLAGS_JSON_SCAN_HPP
#define FLAGS_JSON_SCAN_HPP

#include "flags_core.h"

#include <yajl/yajl_parse.h>

#include <cstddef>

namespace fl {

enum json_scan_result {
    JSON_SCAN_OK,
    JSON_SCAN_DECLINED
};

/* Scans d[0..len) as one JSON text.  Escaped strings are decoded into
 * memory from a (at most len bytes, taken once). */
json_scan_result json_scan(const unsigned char *d, size_t len,
    const yajl_callbacks *cb, void *ctx, const fl_alloc_t *a) noexcept;

} // namespace fl

#endif /* FLAGS_JSON_SCAN_HPP */
