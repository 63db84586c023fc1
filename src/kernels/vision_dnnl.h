/*
 * vision_dnnl.h — how the vision kernels (conv.c, vision_pool.c) run oneDNN:
 * a plan per geometry, built once per thread and replayed.
 *
 * A plan is a short list of oneDNN primitives (reorders around a
 * convolution, a pooling forward and backward) with the memory objects they
 * read and write. Each memory object is bound either to one of the caller's
 * buffers (a "slot": x, the filter, y ...) or to a range of the caller's
 * scratch, and tl_vd_run points them at this call's buffers and executes the
 * steps in order. Nothing of tpuloop's allocates after a plan is built;
 * oneDNN's own dnnl_primitive_execute builds a small argument map per call
 * (a few transient new/delete pairs inside the library, freed before it
 * returns), which no C API of 2.6 avoids.
 *
 * Plans are cached per thread, keyed by the bytes of a geometry struct, so
 * each device worker builds its own on its first step and replays them after;
 * a plan holds memory objects whose data handles it rewrites on every call,
 * which is why it is never shared between threads. The thread's cache, its
 * engine and stream are freed when the thread exits (a pthread key's
 * destructor). The primitives themselves also sit in oneDNN's process-wide
 * primitive cache, so a second thread asking for the same geometry gets the
 * already compiled kernel.
 *
 * One thread per device: each call sets the calling thread's OpenMP
 * nthreads-var to 1 (omp_set_num_threads(1) — per thread in libgomp, so it
 * changes no other thread) before oneDNN creates or runs a primitive. oneDNN
 * then sizes its kernels for one thread and runs them inline in the caller
 * (its parallel() calls the body directly when it has one thread), so no
 * OpenMP team is ever started and the results are the same bits run after
 * run. Scratchpads are user-managed (dnnl_scratchpad_mode_user) and come
 * from the caller's scratch.
 */
#ifndef TL_KERNELS_VISION_DNNL_H
#define TL_KERNELS_VISION_DNNL_H

#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>
#include <stdint.h>

#include "tpuloop/base.h"

#define TL_VD_MAX_MEMS 16
#define TL_VD_MAX_STEPS 10
#define TL_VD_MAX_ARGS 6
#define TL_VD_SCRATCH (-1) /* a memory bound to the caller's scratch */
#define TL_VD_ALIGN 64     /* bytes: each scratch range starts on this boundary */

typedef struct tl_vd_step {
    dnnl_primitive_t prim;
    int nargs;
    dnnl_exec_arg_t args[TL_VD_MAX_ARGS];
} tl_vd_step;

typedef struct tl_vd_plan {
    dnnl_engine_t engine; /* borrowed from the thread's cache */
    int nmem, nsteps;
    dnnl_memory_t mem[TL_VD_MAX_MEMS];
    int slot[TL_VD_MAX_MEMS];        /* the caller's buffer index, or TL_VD_SCRATCH */
    int64_t offset[TL_VD_MAX_MEMS];  /* bytes into the aligned scratch (TL_VD_SCRATCH) */
    tl_vd_step step[TL_VD_MAX_STEPS];
    int64_t scratch_bytes;           /* what the plan's scratch ranges need, TL_VD_ALIGN included */
    int64_t kept_bytes;              /* what it leaves in a caller's buffer for a later plan (tl_vd_input_into) */
    const char *what;                /* the kernel's name, for messages */
} tl_vd_plan;

/* Builds a plan into p (engine and what set, the rest zero); returns a status. */
typedef tl_status (*tl_vd_build_fn)(tl_vd_plan *p, const void *ctx);

/*
 * The calling thread's plan for key (keylen bytes: the geometry struct and
 * what kind of pass it is), built by build(p, ctx) the first time. Errors:
 * those of build (TL_ENOTIMPL when oneDNN has no implementation, TL_ENOMEM),
 * TL_ENOMEM for the cache; nothing is cached on failure.
 */
tl_status tl_vd_get(const void *key, size_t keylen, const char *what, tl_vd_build_fn build, const void *ctx,
                    tl_vd_plan **out);

/*
 * Points the plan's memories at slots[k] (the caller's buffers) and at
 * ranges of scratch (scratch_bytes long; the plan needs p->scratch_bytes),
 * then runs its steps in order on the thread's stream. Errors: TL_EINVAL when
 * scratch is too small (naming both sizes), TL_ERUNTIME when oneDNN fails.
 */
tl_status tl_vd_run(tl_vd_plan *p, void *const *slots, void *scratch, int64_t scratch_bytes);

/* ---- building a plan --------------------------------------------------------- */

/* A status for a failed oneDNN call: TL_ENOMEM, TL_ENOTIMPL or TL_ERUNTIME,
 * with "<what>: oneDNN <call> failed: <status>". */
tl_status tl_vd_fail(const tl_vd_plan *p, dnnl_status_t s, const char *call);

/* A memory of md bound to the caller's buffer slot, or (slot
 * TL_VD_SCRATCH) to a new range of scratch; its index in p->mem, or a
 * negative status. */
int tl_vd_mem(tl_vd_plan *p, const dnnl_memory_desc_t *md, int slot);

/*
 * A primitive read from slot (whose layout is user) in the layout want: the
 * slot itself when the two are the same, else a scratch memory of want and a
 * reorder step slot → it, appended now (so before the step that reads it).
 * Returns the memory's index or a negative status.
 */
int tl_vd_input(tl_vd_plan *p, const dnnl_memory_desc_t *want, const dnnl_memory_desc_t *user, int slot);

/* tl_vd_input whose reordered copy (want differs from user) lands in the
 * caller's buffer into instead of scratch (into TL_VD_SCRATCH: tl_vd_input),
 * for a later plan to read (a convolution's forward leaves its blocked x for
 * the filter gradient); p->kept_bytes says how much it writes there. */
int tl_vd_input_into(tl_vd_plan *p, const dnnl_memory_desc_t *want, const dnnl_memory_desc_t *user, int slot,
                     int into);

/*
 * A primitive's output in the layout got, to land in slot (layout user):
 * the slot itself when the two are the same, else a scratch memory whose
 * reorder into the slot tl_vd_output_done appends after the producing step.
 */
int tl_vd_output(tl_vd_plan *p, const dnnl_memory_desc_t *got, const dnnl_memory_desc_t *user, int slot);
tl_status tl_vd_output_done(tl_vd_plan *p, int mem, const dnnl_memory_desc_t *user, int slot);

/* Appends the primitive of pd (taking ownership of nothing: pd stays the
 * caller's) with its arguments: nargs pairs (DNNL_ARG_*, memory index); the
 * user scratchpad is added when pd asks for one. */
tl_status tl_vd_step_add(tl_vd_plan *p, const_dnnl_primitive_desc_t pd, int nargs, const int *arg, const int *mem);

/* A primitive attribute with the user scratchpad mode; NULL on failure (the
 * status is then in tl_last_status()). Destroy with dnnl_primitive_attr_destroy. */
dnnl_primitive_attr_t tl_vd_attr(const tl_vd_plan *p);

/* dims (n, c, h, w) in NHWC memory order, float32. */
dnnl_memory_desc_t tl_vd_nhwc(int64_t n, int64_t c, int64_t h, int64_t w);

#endif /* TL_KERNELS_VISION_DNNL_H */
