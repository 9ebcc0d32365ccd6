/* The GPU test driver: the one main() of every GPU test program (see
 * gpu_harness.h).  Order: reference self-checks, the suite's setup, a
 * private cache directory, the device check (skip code 77 with the
 * reason), the device and seed, the suite's further requirements (skip
 * with the reason), the cases, the compile / load failure counters,
 * ckjit_shutdown, the summary line and the exit status. */
#include "gpu_harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

gt_check *gt_suite_check;

void gt_fail_at(gt_check *ck, const char *file, int line, const char *fmt, ...) {
  ck->checks++;
  ck->failures++;
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("FAIL %s%s%s:%d: %s (last error: %s)\n", ck->ctx, ck->ctx[0] ? ": " : "", file, line, msg,
         ckjit_last_error());
  fflush(stdout);
}

/* A positive integer from the environment, else def. */
static int env_int(const char *name, int def) {
  const char *v = getenv(name);
  return v ? atoi(v) : def;
}

int gt_main(const gt_suite *suite, int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (suite->self_check) {
    const int bad = suite->self_check();
    if (bad) {
      printf("FAIL: %d reference self-checks failed (the test itself is wrong)\n", bad);
      return 1;
    }
  }
  static gt_check ck;
  memset(&ck, 0, sizeof ck);
  ck.max_report = 5;
  gt_suite_check = &ck;
  gt_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.argc = argc;
  ctx.argv = argv;
  ctx.ck = &ck;
  ctx.threads = env_int("CKJIT_TEST_THREADS", 8);
  if (ctx.threads < 1) ctx.threads = 1;
  if (ctx.threads > 64) ctx.threads = 64;
  ctx.skip_large = env_int("CKJIT_TEST_SKIP_LARGE", 0) != 0;

  if (suite->setup && suite->setup(&ctx)) {
    printf("FAIL: %s: set-up failed\n", suite->name);
    return 1;
  }
  char *tmp = NULL;
  if (suite->cache_tag && !getenv("CKJIT_CACHE_DIR")) {
    tmp = tu_mkdtemp(suite->cache_tag);
    if (tmp) setenv("CKJIT_CACHE_DIR", tmp, 1);
  }
  int status = GT_SKIP_CODE;
  char why[1024];
  if (!gt_have_device(&ctx.info, why, sizeof why)) {
    printf("SKIP: no GPU (%s)\n", why);
    goto out;
  }
  ctx.seed = gt_seed(&ctx.info);
  if (suite->requires && !suite->requires(&ctx, why, sizeof why)) {
    printf("SKIP: %s\n", why);
    goto out;
  }

  const gt_result r = suite->run(&ctx);
  long failed = r.failed;
  if (suite->check_stats) {
    ckjit_stats s;
    ckjit_get_stats(&s);
    printf("stats: %llu compiles (%.0f ms), %llu loads, %llu memory hits, %llu disk hits\n",
           (unsigned long long)s.compiles, s.compile_ms, (unsigned long long)s.loads,
           (unsigned long long)s.memory_hits, (unsigned long long)s.disk_hits);
    if (s.compile_failures || s.load_failures) {
      printf("FAIL: %llu compile failures, %llu load failures\n", (unsigned long long)s.compile_failures,
             (unsigned long long)s.load_failures);
      failed++;
      ck.failures++;
    }
  }
  printf("%s: %ld passed, %ld failed", suite->name, r.cases - r.failed, failed);
  if (ck.checks) printf(" (%ld checks, %ld failed)", ck.checks, ck.failures);
  printf("\n");
  status = failed || ck.failures ? 1 : 0;
out:
  ckjit_shutdown();
  if (tmp) tu_rm_rf(tmp);
  free(tmp);
  return status;
}
