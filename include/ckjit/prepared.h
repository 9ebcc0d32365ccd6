/*
 * ckjit — prepared calls.  Included by ckjit/ckjit.h.
 *
 * A prepared call is one op call with everything fixed but its operand
 * pointers and its stream: the prepare function checks the dtype, shape,
 * strides and parameters, plans the launch and builds (or loads) the kernel
 * once; ckjit_prepared_run then launches it with the pointers of this call,
 * skipping the checks and the planning.  It is for callers that repeat one
 * shape many times and pay for every argument they pass, such as a language
 * binding (the Python package runs softmax this way).  The result of a run
 * is exactly the op's own with the same arguments.
 *
 *  - Operands: a run's pointers may be any aligned or unaligned device
 *    pointers the op takes; where they are less aligned than the prepared
 *    kernel's vectors (known only at run time), the run takes the op's full
 *    path, which picks narrower ones.  Likewise a shape whose plan needs
 *    more than one launch (scratch memory, split rows) always runs the full
 *    path.
 *  - Devices: a prepared call belongs to the device it was prepared for.  A
 *    run whose stream is another device's (the NULL stream: the current
 *    device's) fails with CKJIT_ERROR_INVALID_ARGUMENT naming both.
 *  - Lifetime: the caller owns it; ckjit_prepared_free releases it, never
 *    while a run of it is in progress.  One prepared before ckjit_shutdown
 *    is refused by ckjit_prepared_run (CKJIT_ERROR_INVALID_ARGUMENT): prepare
 *    it again.
 *  - Threads: any number of threads may run one prepared call at once.
 */
/* Outside the guard: whichever header comes first, ckjit.h's types precede ours. */
#include "ckjit/ckjit.h"

#ifndef CKJIT_PREPARED_H
#define CKJIT_PREPARED_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckjit_prepared ckjit_prepared;

/* ckjit_softmax for dtype, rows x cols, row strides ld_x and ld_y and
 * `params` (NULL: the defaults; its valid_cols must be NULL, as a per-call
 * operand it is not prepared), on GPU `device` (-1: the current device, or
 * the default one when none is current).  The kernel is built here, so the
 * first run costs a launch.  *out is NULL on failure. */
CKJIT_API ckjit_status ckjit_softmax_prepare(ckjit_dtype dtype, int64_t rows, int64_t cols,
                                             int64_t ld_x, int64_t ld_y,
                                             const ckjit_softmax_params *params, int device,
                                             ckjit_prepared **out);

/* Runs a prepared call: x is its input, y its output (for softmax, y may be
 * x when ld_y == ld_x). */
CKJIT_API ckjit_status ckjit_prepared_run(const ckjit_prepared *p, const void *x, void *y,
                                          void *stream);

/* Releases a prepared call (NULL: nothing). */
CKJIT_API void ckjit_prepared_free(ckjit_prepared *p);

#ifdef __cplusplus
}
#endif

#endif /* CKJIT_PREPARED_H */
