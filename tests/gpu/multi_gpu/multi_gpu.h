/* Shared by the sources of the multi-GPU test (test_multi_gpu):
 *   ../test_multi_gpu.c  the CUDA driver, the cases (two threads on two GPUs
 *                        at once, one thread switching devices, streams of
 *                        another device than the current one, device info,
 *                        operands on the wrong device), main()
 *   mg_rows.c            one round of the elementwise, transpose and
 *                        row-wise op families, each checked against an f64
 *                        reference
 *   mg_matmul.c          one round of GEMM, grouped GEMM, attention and
 *                        paged K/V append + attention, likewise
 * A round runs on one device: its buffers are allocated while that device's
 * primary context is current (ckjit_malloc works on the current device) and
 * its ops are launched on the thread's own stream there. */
#ifndef CKJIT_TESTS_GPU_MULTI_GPU_H
#define CKJIT_TESTS_GPU_MULTI_GPU_H

#include <stdint.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

#define LL(x) ((long long)(x))

/* Rounds alternate f32 and bf16 (mg_dtype) and, every two rounds, a
 * kernel option (topk_softmax's renormalize), so from this round on every
 * kernel a round uses has been loaded on the device before: its calls must
 * be memory hits. */
#define MG_WARM_ROUND 4

/* One thread's device and what it has done there. */
typedef struct mg_dev {
  int ordinal;
  void *ctx;                /* the device's primary context (a CUcontext) */
  void *stream;             /* the thread's own stream on it */
  void *(*current)(void);   /* the thread's current context (cuCtxGetCurrent) */
  gt_check ck;              /* this thread's checks: a gt_check belongs to one thread */
  tu_rng rng;
  int round;
  long calls;               /* op calls that succeeded */
  long warm_calls;          /* of them, in rounds >= MG_WARM_ROUND */
  long failures_at_begin;   /* ck.failures when the current op's checks began */
} mg_dev;

/* The round's float dtype: f32 on even rounds, bf16 on odd ones. */
static inline ckjit_dtype mg_dtype(const mg_dev *d) { return d->round % 2 ? CKJIT_BF16 : CKJIT_F32; }

/* Relative rounding error of a dtype (half its ulp at worst, relative). */
static inline double mg_rnd(ckjit_dtype dt) {
  return dt == CKJIT_F32 ? 0x1p-24 : dt == CKJIT_F16 ? 0x1p-11 : 0x1p-8;
}

/* Starts the checks of one op call: "GPU <n> round <r>: <what>". */
void mg_begin(mg_dev *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Ends them: one passed check when nothing failed since mg_begin. */
void mg_end(mg_dev *d);
/* An op's status: on success it is counted, the thread's current context
 * must still be the device's (ckjit pushes and pops its own) and the
 * stream is synchronized.  0 when the op ran, else -1 (a failure). */
int mg_ran(mg_dev *d, ckjit_status st, const char *op);
/* |got - want| <= tol, else a failure naming the element. */
void mg_expect(mg_dev *d, const char *what, int64_t i, int64_t j, double got, double want, double tol);
/* Elements past the rows x cols matrix in each row of b (row stride ld)
 * must still be poison (0xFF bytes). */
void mg_expect_padding(mg_dev *d, const gt_buf *b, int64_t rows, int64_t cols, int64_t ld);

/* mg_rows.c: copy2d, unary, binary, transpose, reduce_rows (sum, argmax),
 * softmax, layernorm2d, rmsnorm2d, rmsnorm2d_quant, smoothquant,
 * topk_softmax. */
void mg_rows_round(mg_dev *d);

/* mg_matmul.c: ckjit_gemm (bf16 with an epilogue, f32), ckjit_gemm_grouped,
 * ckjit_attention, ckjit_paged_kv_append then ckjit_paged_attention. */
void mg_matmul_round(mg_dev *d);

#endif
