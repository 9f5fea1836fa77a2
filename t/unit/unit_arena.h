/*
 * unit_arena.h - the request pool of the unit tests.
 *
 * The core takes its request-path memory from a caller's bump allocator
 * and never frees it; nginx hands it the request pool.  Here every block is
 * malloc'd and chained, and arena_reset() frees them all, like a pool at
 * the end of a request, so valgrind sees every test leak-free.  Setting
 * arena_allocs_left makes the allocator fail after that many calls.
 */

#ifndef UNIT_ARENA_H
#define UNIT_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "flags_core.h"

typedef union arena_block_u {
    union arena_block_u  *next;
    max_align_t           align;
} arena_block_t;

static arena_block_t *arena_blocks;
static size_t arena_allocs_left = SIZE_MAX;

static inline void *arena_alloc(void *ctx, size_t n)
{
    (void) ctx;
    if (arena_allocs_left == 0) {
        return NULL;
    }
    arena_allocs_left--;

    arena_block_t *b = malloc(sizeof(arena_block_t) + n);
    if (b == NULL) {
        return NULL;
    }
    b->next = arena_blocks;
    arena_blocks = b;
    return b + 1;
}

static inline void arena_reset(void)
{
    while (arena_blocks != NULL) {
        arena_block_t *next = arena_blocks->next;
        free(arena_blocks);
        arena_blocks = next;
    }
    arena_allocs_left = SIZE_MAX;
}

/* as a cmocka teardown */
static inline int arena_teardown(void **state)
{
    (void) state;
    arena_reset();
    return 0;
}

static const fl_alloc_t arena = { arena_alloc, NULL };

#endif /* UNIT_ARENA_H */
