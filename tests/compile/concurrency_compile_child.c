/* The child processes of test_concurrency_compile (the parent,
 * test_concurrency_compile.c, starts 8 of them and says what the test is):
 * each is that program run again with --child.  A child checks everything
 * it can see alone, so that a failure names the process, the thread and the
 * spec where it happened rather than only a bad cache at the end.
 *
 * Each child waits until all are started, then its 4 threads walk the spec
 * set, each in a different rotation and direction.  Afterwards the child
 * checks:
 *   - every call succeeded, and all its threads got one key per spec;
 *   - ckjit_get_stats(): compiles <= distinct specs (at most one compile per
 *     spec per process), no compile failure, no rejected entry (a reader
 *     never saw a partial or corrupt entry), no failed write;
 *   - per-spec compile counts from its CKJIT_LOG=info lines, reported by
 *     spec when one was compiled more than once;
 *   - for each spec, <cache>/xx/<key>.ckjit exists and decodes to that key,
 *     the arch asked for, the spec's kernel and the reported code size.
 * Then it writes, per spec, its key, code size, kernel and compile count
 * for the parent to compare. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache/entry.h"
#include "cache/key.h"
#include "ckjit/ckjit.h"
#include "concurrency_compile.h"
#include "portable_specs.h"
#include "test_util.h"

/* ---- the spec set (computed the same way in parent and children) ------- */

char g_specs[NSPEC][256];
static char g_kernels[NSPEC][64]; /* expected kernel name per spec (child fills) */

int pick_specs(void) {
  /* Spread over the default set (those with a kernel on both archs), so
   * many families are in. */
  for (size_t k = 0; k < NSPEC; k++)
    if (ps_pick(k, NSPEC, g_specs[k], sizeof g_specs[k])) {
      fprintf(stderr, "fewer than %d portable default specs\n", NSPEC);
      return -1;
    }
  return 0;
}

/* ---- child --------------------------------------------------------------- */

typedef struct thread_job {
  int global; /* process * NTHREAD + thread */
  const char *arch;
  pthread_barrier_t *barrier;
  ckjit_status status[NSPEC];
  ckjit_compile_result result[NSPEC];
  char error[NSPEC][300];
} thread_job;

static void *child_thread(void *p) {
  thread_job *j = p;
  pthread_barrier_wait(j->barrier);
  /* Different start and direction per thread: every spec is asked for by
   * several threads of several processes at nearly the same moment. */
  int start = (j->global * 5) % NSPEC, step = (j->global & 1) ? NSPEC - 1 : 1;
  for (int k = 0; k < NSPEC; k++) {
    int s = (start + k * step) % NSPEC;
    j->status[s] = ckjit_compile_spec(g_specs[s], j->arch, &j->result[s]);
    if (j->status[s] != CKJIT_SUCCESS) snprintf(j->error[s], sizeof j->error[s], "%s", ckjit_last_error());
  }
  return NULL;
}

/* Reads the "compiled <kernel> for <arch> in N ms (key K)" info lines of this
 * process's stderr file and counts them per key. */
static int count_compiles_in_log(const char *log_path, const char keys[NSPEC][33],
                                 unsigned counts[NSPEC], unsigned *other) {
  size_t size = 0;
  char *text = tu_read_file(log_path, &size);
  if (!text) return -1;
  unsigned total = 0;
  *other = 0;
  for (char *line = text; line && *line;) {
    char *end = strchr(line, '\n');
    if (end) *end = 0;
    const char *k;
    if (strstr(line, ": info: compiled ") && (k = strstr(line, "(key "))) {
      int found = 0;
      for (int s = 0; s < NSPEC; s++)
        if (!strncmp(k + 5, keys[s], 32)) {
          counts[s]++;
          found = 1;
        }
      if (!found) (*other)++;
      total++;
    }
    line = end ? end + 1 : NULL;
  }
  free(text);
  return (int)total;
}

/* Checks <cache>/xx/<key>.ckjit: decodes with that key, right arch, kernel
 * and size.  Returns NULL or what is wrong. */
const char *check_entry_file(const char *cache, const char *hex, const char *arch,
                             const char *kernel, size_t code_size, char *why, size_t len) {
  char path[2048];
  tu_fmt(path, sizeof path, "%s/%.2s/%s.ckjit", cache, hex, hex);
  size_t size = 0;
  uint8_t *buf = tu_read_file(path, &size);
  if (!buf) {
    snprintf(why, len, "%s: cannot read (%s)", path, strerror(errno));
    return why;
  }
  ckjit_key key;
  ckjit_entry_meta meta;
  const uint8_t *payload;
  size_t psize;
  const char *r = NULL;
  if (ckjit__key_parse(hex, &key)) {
    snprintf(why, len, "key '%s' is not 32 hex digits", hex);
  } else if (ckjit__entry_decode(buf, size, &key, &meta, &payload, &psize, &r)) {
    snprintf(why, len, "%s does not decode to key %s: %s", path, hex, r);
  } else if (strcmp(meta.arch, arch)) {
    snprintf(why, len, "%s: arch '%s', expected '%s'", path, meta.arch, arch);
  } else if (strcmp(meta.kernel, kernel)) {
    snprintf(why, len, "%s: kernel '%s', expected '%s'", path, meta.kernel, kernel);
  } else if (psize != code_size) {
    snprintf(why, len, "%s: payload %zu bytes, compile result said %zu", path, psize, code_size);
  } else if (psize < 4 || memcmp(payload, "\177ELF", 4)) {
    snprintf(why, len, "%s: payload is not an ELF code object", path);
  } else {
    free(buf);
    return NULL;
  }
  free(buf);
  return why;
}

/* argv: self --child ARCH CACHE INDEX RESULT_FILE LOG_FILE GO_FD */
int child_main(char **argv) {
  const char *arch = argv[2], *cache = argv[3], *result_file = argv[5], *log_file = argv[6];
  int index = atoi(argv[4]), go_fd = atoi(argv[7]);
  if (pick_specs()) return 1;
  /* Wait until the parent has started every child (it closes the pipe). */
  char c;
  while (read(go_fd, &c, 1) > 0) {
  }
  close(go_fd);

  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, NTHREAD);
  thread_job *jobs = calloc(NTHREAD, sizeof *jobs);
  pthread_t t[NTHREAD];
  if (!jobs) return 1;
  for (int i = 0; i < NTHREAD; i++) {
    jobs[i].global = index * NTHREAD + i;
    jobs[i].arch = arch;
    jobs[i].barrier = &barrier;
    if (pthread_create(&t[i], NULL, child_thread, &jobs[i])) return 1;
  }
  for (int i = 0; i < NTHREAD; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&barrier);

  /* Progress and problems go to stdout (stderr is the library's log). */
  int bad = 0, unavailable = 0, calls = 0;
  for (int i = 0; i < NTHREAD; i++)
    for (int s = 0; s < NSPEC; s++) {
      calls++;
      if (jobs[i].status[s] == CKJIT_ERROR_BACKEND_UNAVAILABLE) unavailable++;
    }
  if (unavailable == calls) {
    printf("compiler for %s unavailable: %s\n", arch, jobs[0].error[0]);
    return 77;
  }
  char keys[NSPEC][33];
  for (int s = 0; s < NSPEC; s++) {
    for (int i = 0; i < NTHREAD; i++) {
      const ckjit_compile_result *r = &jobs[i].result[s];
      if (jobs[i].status[s] != CKJIT_SUCCESS) {
        printf("FAIL process %d thread %d %s: %s: %s\n", index, i, g_specs[s],
               ckjit_status_string(jobs[i].status[s]), jobs[i].error[s]);
        bad++;
        continue;
      }
      const ckjit_compile_result *r0 = &jobs[0].result[s];
      if (strlen(r->key) != 32 || strcmp(r->key, r0->key) || r->code_size != r0->code_size ||
          strcmp(r->kernel, r0->kernel) || r->code_size == 0) {
        printf("FAIL process %d thread %d %s: key %s size %zu kernel %s, thread 0 got key %s "
               "size %zu kernel %s\n",
               index, i, g_specs[s], r->key, r->code_size, r->kernel, r0->key, r0->code_size,
               r0->kernel);
        bad++;
      }
    }
    snprintf(keys[s], sizeof keys[s], "%s", jobs[0].result[s].key);
    snprintf(g_kernels[s], sizeof g_kernels[s], "%s", jobs[0].result[s].kernel);
  }
  if (bad) return 1;

  /* Distinct specs asked for (the set could hold duplicates in principle). */
  int distinct = 0;
  for (int s = 0; s < NSPEC; s++) {
    int dup = 0;
    for (int u = 0; u < s; u++) dup |= !strcmp(keys[u], keys[s]);
    distinct += !dup;
  }
  ckjit_stats st;
  ckjit_get_stats(&st);
  printf("process %d (%s): %d calls, %llu compiles, %llu disk hits, %llu disk misses, "
         "%llu writes\n",
         index, arch, calls, (unsigned long long)st.compiles, (unsigned long long)st.disk_hits,
         (unsigned long long)st.disk_misses, (unsigned long long)st.disk_writes);
  unsigned counts[NSPEC] = {0}, other = 0;
  fflush(stderr);
  int logged = count_compiles_in_log(log_file, (const char(*)[33])keys, counts, &other);
  if (logged >= 0 && (uint64_t)logged == st.compiles) {
    for (int s = 0; s < NSPEC; s++)
      if (counts[s] > 1) {
        printf("FAIL process %d: %s (key %s) compiled %u times in this process\n", index,
               g_specs[s], keys[s], counts[s]);
        bad++;
      }
    if (other) {
      printf("FAIL process %d: %u compiles of keys nobody asked for\n", index, other);
      bad++;
    }
  } else {
    printf("note: process %d: %d compile lines in the log, %llu compiles counted; per-spec "
           "counts unavailable (log format?)\n",
           index, logged, (unsigned long long)st.compiles);
  }
  if (st.compiles > (uint64_t)distinct) {
    printf("FAIL process %d: %llu compiles for %d distinct specs (single flight: at most one "
           "compile per spec per process)\n",
           index, (unsigned long long)st.compiles, distinct);
    bad++;
  }
  if (st.compile_failures || st.disk_rejects || st.disk_write_errors) {
    printf("FAIL process %d: %llu compile failures, %llu rejected entries (corrupt or partial "
           "entry seen), %llu failed writes\n",
           index, (unsigned long long)st.compile_failures, (unsigned long long)st.disk_rejects,
           (unsigned long long)st.disk_write_errors);
    bad++;
  }
  /* Every answer is the code object on disk under its key. */
  for (int s = 0; s < NSPEC; s++) {
    char why[2400];
    if (check_entry_file(cache, keys[s], arch, g_kernels[s], jobs[0].result[s].code_size, why,
                         sizeof why)) {
      printf("FAIL process %d %s: %s\n", index, g_specs[s], why);
      bad++;
    }
  }

  FILE *f = fopen(result_file, "w");
  if (!f) return 1;
  for (int s = 0; s < NSPEC; s++)
    fprintf(f, "%s %zu %s %u\n", keys[s], jobs[0].result[s].code_size, g_kernels[s], counts[s]);
  fprintf(f, "compiles %llu\n", (unsigned long long)st.compiles);
  if (fclose(f)) return 1;
  free(jobs);
  ckjit_shutdown();
  return bad ? 1 : 0;
}
