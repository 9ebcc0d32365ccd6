/* GPU suite, runtime behaviour (public API only).  Exits 77 (skip) with the
 * reason when there is no GPU (the driver: tests/common/gpu_harness.c).
 *  - in-process single flight: many threads making the first call of one new
 *    specialization compile it once;
 *  - a later call is a memory hit (no compile, no disk);
 *  - CKJIT_RECORD gets exactly one line for that specialization;
 *  - kernels compiled for another arch (CKJIT_ARCH) are refused at launch
 *    with CKJIT_ERROR_UNSUPPORTED, not launched. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

#define THREADS 16

static void *g_x, *g_y;
static char g_dir[] = "/tmp/ckjit-test-runtime-XXXXXX";
static char g_record[sizeof g_dir + 16];

#define CHECK GT_CHECK

static void *first_call(void *arg) {
  (void)arg;
  ckjit_epilogue epi = {.scale = 3.0f, .bias = -1.0f};
  ckjit_status st = ckjit_unary(CKJIT_UNARY_SILU, CKJIT_F32, 7, 33, g_x, 40, g_y, 40, &epi, NULL);
  return (void *)(intptr_t)st;
}

static void remove_dir(void) { tu_rm_rf(g_dir); }

/* Before the device check: an empty cache of its own (the first call must
 * compile) and CKJIT_RECORD, through ckjit_init. */
static int setup(gt_ctx *ctx) {
  (void)ctx;
  if (!mkdtemp(g_dir)) return 1;
  atexit(remove_dir);
  snprintf(g_record, sizeof g_record, "%s/record.txt", g_dir);
  setenv("CKJIT_RECORD", g_record, 1);
  ckjit_options opts;
  ckjit_options_init(&opts);
  opts.cache_dir = g_dir; /* empty cache: the first call must compile */
  if (ckjit_init(&opts)) {
    fprintf(stderr, "ckjit_init: %s\n", ckjit_last_error());
    return 1;
  }
  return 0;
}

static gt_result run(gt_ctx *ctx) {
  const ckjit_device_info info = ctx->info;
  const char *record = g_record;
  CHECK(ckjit_malloc(&g_x, 7 * 40 * 4) == CKJIT_SUCCESS, "malloc");
  CHECK(ckjit_malloc(&g_y, 7 * 40 * 4) == CKJIT_SUCCESS, "malloc");
  ckjit_memset(g_x, 0, 7 * 40 * 4);

  /* Single flight: THREADS threads ask for one new specialization at once. */
  ckjit_reset_stats();
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, first_call, NULL);
  for (int i = 0; i < THREADS; i++) {
    void *ret;
    pthread_join(t[i], &ret);
    CHECK((intptr_t)ret == CKJIT_SUCCESS, "thread %d: status %d", i, (int)(intptr_t)ret);
  }
  ckjit_stats s;
  ckjit_get_stats(&s);
  CHECK(s.compiles == 1, "%llu compiles for one specialization asked by %d threads",
        (unsigned long long)s.compiles, THREADS);
  CHECK(s.loads == 1, "%llu module loads", (unsigned long long)s.loads);

  /* A repeated call is a memory hit. */
  ckjit_reset_stats();
  CHECK(first_call(NULL) == (void *)(intptr_t)CKJIT_SUCCESS, "repeat");
  ckjit_get_stats(&s);
  CHECK(s.memory_hits == 1 && s.compiles == 0 && s.disk_hits == 0 && s.disk_misses == 0,
        "repeat: memory_hits %llu compiles %llu disk_hits %llu", (unsigned long long)s.memory_hits,
        (unsigned long long)s.compiles, (unsigned long long)s.disk_hits);
  CHECK(ckjit_synchronize(NULL) == CKJIT_SUCCESS, "synchronize");

  /* The record file: one line, for the one specialization used. */
  char line[512] = "", extra[512];
  FILE *f = fopen(record, "r");
  CHECK(f != NULL, "CKJIT_RECORD file %s missing", record);
  if (f) {
    CHECK(fgets(line, sizeof line, f) != NULL, "empty record file");
    CHECK(fgets(extra, sizeof extra, f) == NULL, "more than one record line: %s", extra);
    fclose(f);
  }
  char want[128];
  snprintf(want, sizeof want, "ckjit-spec 1 %s elementwise:dtype=f32,op=silu,epilogue=scale_bias,",
           info.arch);
  CHECK(!strncmp(line, want, strlen(want)), "record line '%s' does not start with '%s'", line, want);
  printf("recorded: %s", line);
  unsetenv("CKJIT_RECORD");

  /* A prepared call (7 x 40 f32, zeros: every output 1/40) runs until
   * ckjit_shutdown, and is refused after it, also once ckjit is up again. */
  ckjit_prepared *prepared = NULL;
  ckjit_status pst = ckjit_softmax_prepare(CKJIT_F32, 7, 40, 40, 40, NULL, -1, &prepared);
  CHECK(pst == CKJIT_SUCCESS, "ckjit_softmax_prepare: %s", ckjit_last_error());
  if (pst == CKJIT_SUCCESS) {
    CHECK(ckjit_prepared_run(prepared, g_x, g_y, NULL) == CKJIT_SUCCESS, "ckjit_prepared_run: %s",
          ckjit_last_error());
    float row[40];
    CHECK(ckjit_memcpy(row, g_y, sizeof row, CKJIT_DEVICE_TO_HOST) == CKJIT_SUCCESS, "copy back");
    CHECK(row[0] == 1.0f / 40 && row[39] == 1.0f / 40, "prepared softmax of zeros: %g %g",
          (double)row[0], (double)row[39]);
  }
  ckjit_free(g_x);
  ckjit_free(g_y);
  ckjit_shutdown();
  if (prepared) {
    pst = ckjit_prepared_run(prepared, (void *)256, (void *)256, NULL);
    CHECK(pst == CKJIT_ERROR_INVALID_ARGUMENT && strstr(ckjit_last_error(), "ckjit_shutdown"),
          "a prepared call after ckjit_shutdown: %s (%s)", ckjit_status_string(pst),
          ckjit_last_error());
  }

  /* Another arch than the device's: compiled fine, refused at launch. */
  const char *other = info.backend == CKJIT_BACKEND_CUDA ? (strcmp(info.device_arch, "sm_80") ? "sm_80" : "sm_90")
                                                         : "gfx1030";
  setenv("CKJIT_ARCH", other, 1);
  void *x = NULL;
  CHECK(ckjit_malloc(&x, 4096) == CKJIT_SUCCESS, "malloc after re-init");
  ckjit_status st = ckjit_copy2d(CKJIT_F32, 1, 16, x, 16, x, 16, NULL);
  CHECK(st == CKJIT_ERROR_UNSUPPORTED, "launch with CKJIT_ARCH=%s on %s gave %s", other,
        info.device_arch, ckjit_status_string(st));
  CHECK(strstr(ckjit_last_error(), other) != NULL, "message names the arch: %s", ckjit_last_error());
  printf("CKJIT_ARCH=%s on %s: %s\n", other, info.device_arch, ckjit_last_error());
  if (prepared) {
    pst = ckjit_prepared_run(prepared, x, x, NULL);
    CHECK(pst == CKJIT_ERROR_INVALID_ARGUMENT, "a prepared call after ckjit is up again: %s",
          ckjit_status_string(pst));
    ckjit_prepared_free(prepared);
  }
  ckjit_free(x);
  ckjit_shutdown();

  if (!ctx->ck->failures) printf("all runtime checks passed\n");
  return (gt_result){ctx->ck->checks, ctx->ck->failures};
}

static const gt_suite suite = {
    .name = "runtime_gpu",
    .setup = setup,
    .run = run,
};

GT_MAIN(suite)
