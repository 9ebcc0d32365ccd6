/* CKJIT_TUNE's record: the GEMM configurations measured fastest per shape
 * class (tune.c), kept in memory and in `<cache dir>/gemm-tune.txt`, so
 * that later processes use them without timing again.
 *
 * The file is append-only, one line per measurement:
 *   ckjit-gemm-tune 1 <class> <pipe> <tile> <stages> <splits>
 * (splits -1: Stream-K, wgmma only)
 * (the class names the arch).  A later line for the same class wins; lines
 * that do not parse or hold values out of range are ignored, so a torn or
 * edited file costs at most a re-measurement.  Each line is one write() on
 * an O_APPEND descriptor (ckjit__file_append, cache/atomic_file.h, the one
 * file writer), so concurrent processes do not interleave. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "cache/atomic_file.h"
#include "tune.h"

enum { MAX_CLASSES = 512, CLASS_LEN = 128 };

typedef struct tuned {
  char cls[CLASS_LEN];
  gemm_choice choice;
} tuned;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static tuned table[MAX_CLASSES];
static int n_table, loaded;
/* Read without the lock: the file has been read and there are records. */
static _Atomic int loaded_fast, any_fast;
static char file_path[4096];

int ckjit__gemm_tune_mode(void) {
  const char *v = getenv("CKJIT_TUNE");
  if (!v || !*v) return 0;
  return strcmp(v, "0") == 0 ? -1 : 1;
}

static int valid(const gemm_choice *c) {
  return c->pipe >= 0 && c->pipe <= 2 && c->tile >= 0 && c->tile <= 256 && c->stages >= 0 &&
         c->stages <= CKJIT_GEMM_WGMMA_MAX_STAGES && ((c->splits >= 1 && c->splits <= 32) || (c->pipe == 2 && c->splits == -1));
}

static void put(const char *cls, const gemm_choice *c) {
  for (int i = 0; i < n_table; i++)
    if (!strcmp(table[i].cls, cls)) {
      table[i].choice = *c;
      return;
    }
  if (n_table == MAX_CLASSES) return;
  snprintf(table[n_table].cls, CLASS_LEN, "%s", cls);
  table[n_table++].choice = *c;
}

/* Under `lock`: reads the file of `dir` once (the first directory given
 * is the one used for the process). */
static void load(const char *dir) {
  if (loaded) return;
  loaded = 1;
  if (!dir || !*dir) return;
  snprintf(file_path, sizeof file_path, "%s/gemm-tune.txt", dir);
  FILE *f = fopen(file_path, "r");
  if (!f) return;
  char line[512], cls[CLASS_LEN];
  while (fgets(line, sizeof line, f)) {
    gemm_choice c;
    int version, used = 0;
    if (sscanf(line, "ckjit-gemm-tune %d %127s %d %d %d %d%n", &version, cls, &c.pipe, &c.tile,
               &c.stages, &c.splits, &used) == 6 &&
        version == 1 && (line[used] == '\n' || line[used] == '\0') && valid(&c))
      put(cls, &c);
  }
  fclose(f);
}

/* Under `lock`: publishes what the lock-free check reads. */
static void publish(void) {
  atomic_store(&any_fast, n_table > 0);
  atomic_store(&loaded_fast, 1);
}

int ckjit__gemm_tune_any(const char *dir) {
  if (atomic_load(&loaded_fast)) return atomic_load(&any_fast);
  pthread_mutex_lock(&lock);
  load(dir);
  publish();
  pthread_mutex_unlock(&lock);
  return atomic_load(&any_fast);
}

int ckjit__gemm_tune_lookup(const char *dir, const char *cls, gemm_choice *out) {
  int found = 0;
  pthread_mutex_lock(&lock);
  load(dir);
  for (int i = 0; i < n_table && !found; i++)
    if (!strcmp(table[i].cls, cls)) *out = table[i].choice, found = 1;
  pthread_mutex_unlock(&lock);
  return found;
}

void ckjit__gemm_tune_store(const char *dir, const char *cls, const gemm_choice *c) {
  if (!valid(c) || strlen(cls) >= CLASS_LEN || strchr(cls, ' ')) return;
  pthread_mutex_lock(&lock);
  load(dir);
  put(cls, c);
  publish();
  if (dir && file_path[0]) {
    /* One appended line (cache/atomic_file.h); after a torn last line (a
     * crash mid-write) it starts on a new line. */
    char line[256];
    int len = snprintf(line, sizeof line, "ckjit-gemm-tune 1 %s %d %d %d %d\n", cls, c->pipe,
                       c->tile, c->stages, c->splits);
    ckjit_file_error e;
    const int quiet = ckjit__error_quiet(1); /* best effort: the call goes on */
    if (ckjit__file_append(file_path, line, (size_t)len, 0600, CKJIT_FILE_NEW_LINE, &e) !=
        CKJIT_SUCCESS)
      CKJIT_WARN("CKJIT_TUNE: cannot record in %s: %s (kept for this process)", file_path,
                 e.err ? strerror(e.err) : "short write");
    ckjit__error_quiet(quiet);
  }
  pthread_mutex_unlock(&lock);
}
