/*
 * unit_project.h - the tests' own inputs, which are valid: a project from
 * JSON text (source "t.json") and, with unit_arena.h, a caller from a
 * query string; either failing the test with the core's message when it
 * is not.  Include after cmocka.h (and unit_arena.h for user()).
 */

#ifndef UNIT_PROJECT_H
#define UNIT_PROJECT_H

#include <string.h>

#include "flags_core.h"

static inline fl_project_t *load(const char *json)
{
    fl_project_t *p = NULL;
    char err[512];

    if (fl_project_load_buffer(json, strlen(json), "t.json", &p, err,
                               sizeof(err)) != FL_OK)
    {
        fail_msg("load: %s", err);
    }
    return p;
}

#ifdef UNIT_ARENA_H

static inline fl_user_t user(const char *query)
{
    fl_user_t u;
    char err[256];
    fl_status_t rc = fl_parse_query(query, strlen(query), 1000, &arena, &u,
                                    err, sizeof(err));
    if (rc != FL_OK) {
        fail_msg("query \"%s\": %s", query, err);
    }
    return u;
}

#endif

#endif /* UNIT_PROJECT_H */
