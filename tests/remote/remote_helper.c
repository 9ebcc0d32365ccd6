/* One process of a fleet, for the remote cache tests (test_remote.c) and
 * bench/fleet.py: compiles specs with ckjit_compile_spec under the
 * environment it was given (CKJIT_CACHE_DIR, CKJIT_REMOTE_CACHE, ...) and
 * prints what happened.
 *
 *   remote_helper [--threads N] [--slow-ms MS] [--option-url URL] [--init-first] ARCH SPEC...
 *
 *   --threads N       N threads, each compiling every SPEC (thread t starts at
 *                     SPEC t, so threads meet on the same keys); default 1
 *   --slow-ms MS      each compile first prints "compiling <kernel>" (flushed)
 *                     and sleeps MS inside the build (ckjit__build_test_hook):
 *                     the process holds the remote lease meanwhile
 *   --option-url URL  ckjit_init with ckjit_options.remote_cache = URL
 *   --init-first      initialize the library (ckjit_get_device_info) before the
 *                     timed calls, so a call's ms is its build alone
 *
 * stdout: one line per call, "call T I status=S cached=C key=K size=N ms=X
 * remote_ms=Y compile_ms=Z" (the two deltas are process-wide: meaningful
 * with one thread), then "stats compiles=... wall_ms=...".  Exit 0 when every
 * call succeeded, 1 otherwise, 3 when ckjit_init failed ("init status=...
 * error=..."), 77 when ARCH has no compiler on this host. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckjit/ckjit.h"
#include "runtime/build.h"

#define MAX_THREADS 64

static int g_slow_ms;
static const char *g_arch;
static char **g_specs;
static int g_nspecs;
static int g_failures;
static int g_unavailable; /* failures that were CKJIT_ERROR_BACKEND_UNAVAILABLE */
static pthread_mutex_t g_out = PTHREAD_MUTEX_INITIALIZER;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void slow_hook(const char *stage, const char *kernel) {
  if (strcmp(stage, "compile")) return;
  pthread_mutex_lock(&g_out);
  printf("compiling %s\n", kernel);
  fflush(stdout);
  pthread_mutex_unlock(&g_out);
  struct timespec ts = {g_slow_ms / 1000, (long)(g_slow_ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static void *run(void *arg) {
  const int t = (int)(intptr_t)arg;
  for (int k = 0; k < g_nspecs; k++) {
    const int i = (t + k) % g_nspecs;
    ckjit_stats before, after;
    ckjit_get_stats(&before);
    ckjit_compile_result r;
    double t0 = now_ms();
    ckjit_status st = ckjit_compile_spec(g_specs[i], g_arch, &r);
    double ms = now_ms() - t0;
    ckjit_get_stats(&after);
    pthread_mutex_lock(&g_out);
    if (st != CKJIT_SUCCESS) {
      g_failures++;
      g_unavailable += st == CKJIT_ERROR_BACKEND_UNAVAILABLE;
      fprintf(stderr, "remote_helper: %s: %s: %s\n", g_specs[i], ckjit_status_string(st),
              ckjit_last_error());
    }
    printf("call %d %d status=%s cached=%d key=%s size=%zu ms=%.3f remote_ms=%.3f compile_ms=%.3f\n",
           t, i, ckjit_status_string(st), r.cached, r.key, r.code_size, ms,
           after.remote_ms - before.remote_ms, after.compile_ms - before.compile_ms);
    fflush(stdout);
    pthread_mutex_unlock(&g_out);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int threads = 1, a = 1, init_first = 0;
  const char *option_url = NULL;
  for (; a < argc && !strncmp(argv[a], "--", 2); a++) {
    if (!strcmp(argv[a], "--threads") && a + 1 < argc) threads = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--slow-ms") && a + 1 < argc) g_slow_ms = atoi(argv[++a]);
    else if (!strcmp(argv[a], "--option-url") && a + 1 < argc) option_url = argv[++a];
    else if (!strcmp(argv[a], "--init-first")) init_first = 1;
    else {
      fprintf(stderr, "remote_helper: unknown option %s\n", argv[a]);
      return 2;
    }
  }
  if (argc - a < 2 || threads < 1 || threads > MAX_THREADS) {
    fprintf(stderr, "usage: remote_helper [--threads N] [--slow-ms MS] [--option-url URL] "
                    "[--init-first] ARCH SPEC...\n");
    return 2;
  }
  g_arch = argv[a];
  g_specs = argv + a + 1;
  g_nspecs = argc - a - 1;
  if (g_slow_ms > 0) ckjit__build_test_hook = slow_hook;
  if (option_url) {
    ckjit_options o;
    ckjit_options_init(&o);
    o.remote_cache = option_url;
    ckjit_status st = ckjit_init(&o);
    if (st != CKJIT_SUCCESS) {
      printf("init status=%s error=%s\n", ckjit_status_string(st), ckjit_last_error());
      return 3;
    }
    printf("init status=CKJIT_SUCCESS\n");
  }
  if (init_first) {
    ckjit_device_info info;
    (void)ckjit_get_device_info(&info);
  }
  const double t0 = now_ms();
  pthread_t tid[MAX_THREADS];
  for (int t = 0; t < threads; t++)
    if (pthread_create(&tid[t], NULL, run, (void *)(intptr_t)t) != 0) return 1;
  for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
  const double wall = now_ms() - t0;
  ckjit_stats s;
  ckjit_get_stats(&s);
  printf("stats compiles=%llu compile_failures=%llu disk_hits=%llu disk_writes=%llu "
         "remote_hits=%llu remote_misses=%llu remote_rejects=%llu remote_writes=%llu "
         "remote_errors=%llu remote_lease_waits=%llu remote_ms=%.3f compile_ms=%.3f wall_ms=%.3f "
         "failures=%d\n",
         (unsigned long long)s.compiles, (unsigned long long)s.compile_failures,
         (unsigned long long)s.disk_hits, (unsigned long long)s.disk_writes,
         (unsigned long long)s.remote_hits, (unsigned long long)s.remote_misses,
         (unsigned long long)s.remote_rejects, (unsigned long long)s.remote_writes,
         (unsigned long long)s.remote_errors, (unsigned long long)s.remote_lease_waits,
         s.remote_ms, s.compile_ms, wall, g_failures);
  ckjit_shutdown();
  if (g_failures && g_unavailable == g_failures) return 77; /* no compiler for ARCH here */
  return g_failures ? 1 : 0;
}
