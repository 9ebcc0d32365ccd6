/* Running a GEMM plan: the kernel argument of a problem, the launches, and
 * the split-K / Stream-K steps between them (run.c, split_k.c). */
#ifndef CKJIT_RUNTIME_OPS_GEMM_RUN_H
#define CKJIT_RUNTIME_OPS_GEMM_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "abi/gemm_args.h"
#include "plan.h"

/* ---- run.c ---------------------------------------------------------------------- */

/* Widest copies (elements, up to 16 bytes) A's and B's pointers, leading
 * dimensions and batch strides allow. */
void ckjit__gemm_operand_vecs(const ckjit_gemm_desc *g, int *vec_a, int *vec_b);

/* The kernels' problem of `g` under plan `pl`: one K slice (no split). */
void ckjit__gemm_problem_of(const ckjit_gemm_desc *g, const gemm_plan *pl, ckjit_gemm_problem *p);

/* Launches `spec` on `blocks` blocks with `args`, its argument struct
 * (abi/gemm_args.h; every GEMM kernel takes its one struct by value);
 * refuses a tile the GPU's shared memory cannot hold. */
ckjit_status ckjit__gemm_launch(ckjit_gpu *gpu, const ckjit_spec *spec, int64_t blocks, const void *args,
                                void *stream);

/* Runs `g` with plan `plan` and `want` split-K slices (CKJIT_GEMM_STREAM_K:
 * Stream-K, where the pipeline reads through TMA; otherwise the automatic
 * split). */
ckjit_status ckjit__gemm_run_plan(ckjit_gpu *gpu, const ckjit_gemm_desc *g, const gemm_plan *plan,
                                  int want, void *stream);

/* ---- split_k.c ------------------------------------------------------------------ */

/* K per slice, a whole number of K steps; then the number of non-empty slices. */
void ckjit__gemm_slice_k(int64_t k, int bk, int want, int64_t *k_slice, int64_t *splits);

/* The main kernel's grid for `tiles` tiles in `splits` K slices, and the
 * f32 scratch its partials need (*bytes, 0: none).  Stream-K (`want`
 * CKJIT_GEMM_STREAM_K): the split into *sk; otherwise every unit (tile, K
 * slice) is whole: sk->dp_tiles. */
int64_t ckjit__gemm_split_grid(const ckjit_gemm_desc *g, const gemm_plan *pl, int64_t tiles,
                               int64_t splits, int want, int64_t sms, ckjit_streamk *sk,
                               size_t *bytes);

/* The second kernel: the fixed-order sum of the partials with the
 * epilogue; Stream-K's form when `sk` is given. */
ckjit_status ckjit__gemm_launch_reduce(ckjit_gpu *gpu, const ckjit_gemm_desc *g, const gemm_plan *pl,
                                       const ckjit_gemm_problem *p, const ckjit_streamk *sk,
                                       void *stream);

#endif
