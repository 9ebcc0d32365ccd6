/* The frame every op family fills, in this order:
 *
 *   validate   the public arguments, with the shared checks below; a bad
 *              argument gets a status and a message naming the function;
 *   plan       the tile policy: the spec (which kernel) and the launch shape
 *              (grid, block, shared memory), in a ckjit_launch_plan;
 *   arguments  the family's kernel-argument struct (kernel_src/abi/);
 *   run        ckjit__op_run on the stream's GPU (ckjit__stream_gpu, which
 *              families that plan by the device's properties call before
 *              planning): the GPU's kernel table, then one launch.
 *
 * A family lives in runtime/ops/<family>/: <family>_family.c describes its
 * kernels (parameters, spec checks, the default set that ckjit-prewarm
 * compiles) and <family>.c holds the four steps and the public functions. */
#ifndef CKJIT_RUNTIME_OPS_OP_FRAME_H
#define CKJIT_RUNTIME_OPS_OP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "ckjit/ckjit.h"
#include "runtime/dispatch.h" /* ckjit__check_pointers */
#include "runtime/spec.h"

typedef struct ckjit_launch_plan {
  ckjit_spec spec;
  unsigned grid[3], block[3];
  unsigned cluster; /* blocks per cluster along x (1: none; ckjit__kernel_launch) */
  unsigned shared_bytes;
} ckjit_launch_plan;

/* An empty plan of `family`: all parameters 0, grid and block 1 x 1 x 1. */
void ckjit__plan_init(ckjit_launch_plan *plan, ckjit_family_id family);

/* Gets (compiling on first use) the kernel of plan->spec on `gpu` and
 * launches it on `stream` with `args`, the family's kernel-argument struct
 * S, and `params`, its S_params (kernel_src/abi/abi.h). */
ckjit_status ckjit__op_run(ckjit_gpu *gpu, const ckjit_launch_plan *plan, const void *args,
                           const ckjit_abi_params *params, void *stream);

/* ---- launch shape ----------------------------------------------------------- */

/* Grid limits every backend accepts: x below 2^31, y and z below 2^16.
 * Kernels whose grid is clamped walk the rest grid-stride. */
#define CKJIT_GRID_X_MAX 0x7fffffffu
#define CKJIT_GRID_YZ_MAX 65535u
static inline unsigned ckjit__grid_x(int64_t blocks) {
  return blocks < (int64_t)CKJIT_GRID_X_MAX ? (unsigned)blocks : CKJIT_GRID_X_MAX;
}
static inline unsigned ckjit__grid_yz(int64_t blocks) {
  return blocks < (int64_t)CKJIT_GRID_YZ_MAX ? (unsigned)blocks : CKJIT_GRID_YZ_MAX;
}

/* The widest vector of `elem_size`-byte elements in 16 bytes, at most `max`. */
static inline int ckjit__widest_vec(size_t elem_size, int max) {
  int vec = (int)(16 / elem_size);
  return vec < max ? vec : max;
}

/* The widest vector (in elements, at most 16 bytes and `max_vec`) that every
 * pointer and every stride (in elements) is aligned to. */
int ckjit__pick_vec(size_t elem_size, const void *const *ptrs, int n_ptrs, const int64_t *strides,
                    int n_strides, int max_vec);

/* ---- test and measurement knobs ---------------------------------------------- */

/* The integer environment variable `name` in [lo, hi] into *value (left as
 * it is when the variable is unset or empty).  Read on every call, so a test
 * or a benchmark can change it between calls; a malformed value fails the
 * call with CKJIT_ERROR_INVALID_ARGUMENT (a silent default would measure or
 * test something other than what was asked). */
ckjit_status ckjit__knob_int(const char *api, const char *name, int lo, int hi, int *value);

/* ---- argument checks shared by the families ---------------------------------- */

/* f32, f16 or bf16; otherwise UNSUPPORTED (another dtype) or INVALID_ARGUMENT. */
ckjit_status ckjit__check_dtype(const char *api, ckjit_dtype dtype);

/* rows x cols with row stride ld must be addressable: sizes >= 1, ld >= cols,
 * and the byte extent must not overflow. */
ckjit_status ckjit__check_matrix(const char *api, const char *name, const void *ptr, int64_t rows,
                                 int64_t cols, int64_t ld, size_t elem_size);

/* And ckjit__check_pointers (runtime/dispatch.h): with CKJIT_DEVICE_CHECKS=1,
 * operands must be memory of the stream's device. */

#endif
