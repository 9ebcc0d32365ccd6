/* GPU suite for the row-wise ops: reductions (ckjit_reduce_rows, ckjit_reduce),
 * softmax / log-softmax, layernorm2d, rmsnorm2d, rowwise dynamic quantization
 * (ckjit_rmsnorm2d_quant, ckjit_smoothquant) and MoE gating
 * (ckjit_topk_softmax), each against a CPU reference computed in double,
 * through the public API only.  Exits 77 (skip) when there is no GPU; the
 * reference self-checks run first, GPU or not.
 *
 * The driver is tests/common/gpu_harness.c; the ops' checks are in one
 * file each (rows_gpu.h lists them), run here as one task list by a pool
 * of worker threads, then the softmax exactness checks and the > 2^31
 * cases.
 *
 * Also covered: padded row strides and base pointers misaligned by one
 * element (scalar paths), in-place softmax / layernorm (y = x), sum_out
 * aliasing residual or x, params = NULL, output buffers poisoned (0xFF)
 * before each call and checked outside the logical output (row padding,
 * tail guard), inputs' padding filled with NaN (a kernel reading it into a
 * result shows), inputs checked unchanged, and tensors past 2^31 elements.
 *
 * Environment: CKJIT_TEST_SEED (default: time), CKJIT_TEST_THREADS (worker
 * threads, default 8), CKJIT_TEST_SKIP_LARGE=1 (skip the > 2^31-element
 * cases), CKJIT_TEST_SOFTMAX_EXACT_ONLY=1 (run only the softmax exactness
 * and f32-bound checks, run_softmax_exact).
 *
 * Tolerances: rows_gpu.h (the window every output is checked in) and the
 * top of each op's file (its f32 error bound). */
#include <pthread.h>

#include "rows_gpu.h"

/* ---- reference self-checks (run first, GPU or not) --------------------------- */

static int self_checks(void) {
  self_check_quant();
  self_check_tolerances();
  self_check_reduce();
  self_check_softmax();
  self_check_norm();
  self_check_topk();
  const int failed = self_check_failures();
  if (!failed) printf("reference self-checks passed (fp8 e4m3 codec on all 256 codes, int8, references)\n");
  return failed;
}

/* ---- the task list, on worker threads ------------------------------------------- */

static atomic_size_t g_next;
static atomic_int g_failed_tasks;

static int run_task(const task *t) {
  switch (t->kind) {
    case K_REDUCE_ROWS: return run_reduce_rows(t);
    case K_REDUCE_ND: return run_reduce_nd(t);
    case K_SOFTMAX: return run_softmax(t);
    case K_LAYERNORM:
    case K_RMSNORM:
    case K_RMSQUANT: return run_norm(t);
    case K_SMOOTHQUANT: return run_smoothquant(t);
    case K_TOPK: return run_topk(t);
  }
  return 1;
}

static void *worker(void *p) {
  (void)p;
  for (;;) {
    size_t i = atomic_fetch_add(&g_next, 1);
    if (i >= g_ntasks) break;
    if (run_task(&g_tasks[i])) atomic_fetch_add(&g_failed_tasks, 1);
  }
  return NULL;
}

/* ---- the run ----------------------------------------------------------------------- */

static gt_result run(gt_ctx *ctx) {
  const uint64_t seed = ctx->seed;
  const char *only = getenv("CKJIT_TEST_SOFTMAX_EXACT_ONLY");
  if (only && atoi(only)) {
    const int f = run_softmax_exact(seed);
    return (gt_result){g_sm_calls, f};
  }

  build_tasks(seed);
  const int nthreads = ctx->threads;
  pthread_t th[64];
  for (int i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, worker, NULL);
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
  int failed = atomic_load(&g_failed_tasks);
  size_t per_kind[8] = {0};
  for (size_t i = 0; i < g_ntasks; i++) per_kind[g_tasks[i].kind]++;
  printf("%zu op checks (", g_ntasks);
  for (int k = 0; k < 8; k++) printf("%s%zu %s", k ? ", " : "", per_kind[k], kind_names[k]);
  printf("): %zu passed, %d failed\n", g_ntasks - (size_t)failed, failed);
  report_quant();

  failed += run_softmax_exact(seed);

  int large_failed = 0, large_run = 0;
  if (ctx->skip_large) {
    printf("SKIP large cases: CKJIT_TEST_SKIP_LARGE is set\n");
  } else {
    large_failed = run_large(nthreads, seed, &large_run);
  }
  free(g_tasks);
  int total_failed = failed + large_failed;
  return (gt_result){(long)g_ntasks + large_run + g_sm_calls, total_failed};
}

static const gt_suite suite = {
    .name = "rows_gpu",
    .cache_tag = "rows-gpu",
    .self_check = self_checks,
    .run = run,
    .check_stats = 1,
};

GT_MAIN(suite)
