/* example_int.h — the inside of a parsed tl_example (tpuloop/example.h),
 * shared by example.c (decoding) and example_spec.c (feature specs). */
#ifndef TL_IO_EXAMPLE_INT_H
#define TL_IO_EXAMPLE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "tpuloop/example.h"

struct tl_example {
    uint64_t index;
    bool sequence;
    ProtobufCMessage *msg;  /* the decoded Example or SequenceExample; the view points into it */
    tl_feature *features;   /* (n_features) sorted by key, unique */
    size_t n_features;
    tl_feature_list *lists; /* (n_lists) sorted by key, unique */
    size_t n_lists;
    tl_feature *steps;      /* every list's steps, list after list */
    tl_bytes *bytes;        /* every bytes value of the view, feature after feature */
    /* Everything above that is a pointer points into the arena (example.c):
     * blocks newest first, freed together by tl_example_destroy. */
    struct arena_block *arena;
    size_t arena_next;      /* bytes the next block will hold */
    bool oom;               /* an arena allocation failed */
};

#endif /* TL_IO_EXAMPLE_INT_H */
