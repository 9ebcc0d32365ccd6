/* CKJIT_TUNE's record (tune_record.h has the file format and the rules). */
#include "tune_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "cache/atomic_file.h"

/* The class's conversion in the line format: TUNE_CLASS_LEN - 1 characters. */
#define CLASS_SCAN "%127s"
_Static_assert(TUNE_CLASS_LEN == 128, "CLASS_SCAN reads TUNE_CLASS_LEN - 1 characters");
_Static_assert(TUNE_CHOICE_VALUES == 4, "the line format holds four values");

enum { LINE_VERSION = 1 };

int ckjit__tune_mode(void) {
  const char *v = getenv("CKJIT_TUNE");
  if (!v || !*v) return 0;
  return strcmp(v, "0") == 0 ? -1 : 1;
}

int ckjit__tune_mode_cached(void) {
  static _Atomic int mode_plus_2; /* 0: not read yet */
  int mode = atomic_load_explicit(&mode_plus_2, memory_order_relaxed) - 2;
  if (mode == -2) atomic_store(&mode_plus_2, (mode = ckjit__tune_mode()) + 2);
  return mode;
}

/* A class name that reads back from its line as itself. */
static int class_name_ok(const char *cls) {
  const size_t len = strlen(cls);
  if (len == 0 || len >= TUNE_CLASS_LEN) return 0;
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)cls[i] <= ' ' || (unsigned char)cls[i] == 0x7f) return 0;
  return 1;
}

/* Under r->lock. */
static void put(tune_record *r, const char *cls, const tune_choice *c) {
  for (int i = 0; i < r->n_entries; i++)
    if (!strcmp(r->entries[i].cls, cls)) {
      r->entries[i].choice = *c;
      return;
    }
  if (r->n_entries == TUNE_MAX_CLASSES) return;
  snprintf(r->entries[r->n_entries].cls, TUNE_CLASS_LEN, "%s", cls);
  r->entries[r->n_entries++].choice = *c;
}

/* One line of the file into *cls and *c; 1 when it is whole and valid. */
static int parse_line(const tune_record *r, const char *line, char *cls, tune_choice *c) {
  char tag[64];
  const int tag_len = snprintf(tag, sizeof tag, "ckjit-%s-tune", r->family);
  if (tag_len <= 0 || (size_t)tag_len >= sizeof tag || strncmp(line, tag, (size_t)tag_len))
    return 0;
  const char *rest = line + tag_len;
  int version, used = 0;
  int *v = c->value;
  return sscanf(rest, " %d " CLASS_SCAN " %d %d %d %d%n", &version, cls, &v[0], &v[1], &v[2],
                &v[3], &used) == 6 &&
         version == LINE_VERSION && (rest[used] == '\n' || rest[used] == '\0') && r->valid(c);
}

/* Under r->lock: reads the file of `dir` once (the first directory given
 * is the one used for the process). */
static void load(tune_record *r, const char *dir) {
  if (r->loaded) return;
  r->loaded = 1;
  if (!dir || !*dir) return;
  snprintf(r->file_path, sizeof r->file_path, "%s/%s-tune.txt", dir, r->family);
  FILE *f = fopen(r->file_path, "r");
  if (!f) return;
  char line[512], cls[TUNE_CLASS_LEN];
  while (fgets(line, sizeof line, f)) {
    tune_choice c;
    if (parse_line(r, line, cls, &c)) put(r, cls, &c);
  }
  fclose(f);
}

/* Under r->lock: publishes what the lock-free check reads. */
static void publish(tune_record *r) {
  atomic_store(&r->any_fast, r->n_entries > 0);
  atomic_store(&r->loaded_fast, 1);
}

int ckjit__tune_any(tune_record *r, const char *dir) {
  if (atomic_load(&r->loaded_fast)) return atomic_load(&r->any_fast);
  pthread_mutex_lock(&r->lock);
  load(r, dir);
  publish(r);
  pthread_mutex_unlock(&r->lock);
  return atomic_load(&r->any_fast);
}

int ckjit__tune_lookup(tune_record *r, const char *dir, const char *cls, tune_choice *out) {
  int found = 0;
  pthread_mutex_lock(&r->lock);
  load(r, dir);
  for (int i = 0; i < r->n_entries && !found; i++)
    if (!strcmp(r->entries[i].cls, cls)) *out = r->entries[i].choice, found = 1;
  pthread_mutex_unlock(&r->lock);
  return found;
}

void ckjit__tune_store(tune_record *r, const char *dir, const char *cls, const tune_choice *c) {
  if (!r->valid(c) || !class_name_ok(cls)) return;
  pthread_mutex_lock(&r->lock);
  load(r, dir);
  put(r, cls, c);
  publish(r);
  if (dir && r->file_path[0]) {
    /* One appended line (cache/atomic_file.h); after a torn last line (a
     * crash mid-write) it starts on a new line. */
    char line[256];
    const int len = snprintf(line, sizeof line, "ckjit-%s-tune %d %s %d %d %d %d\n", r->family,
                             LINE_VERSION, cls, c->value[0], c->value[1], c->value[2], c->value[3]);
    ckjit_file_error e;
    memset(&e, 0, sizeof e);
    const int quiet = ckjit__error_quiet(1); /* best effort: the call goes on */
    /* The line always fits: a short family name, a class of at most 127
     * characters and four integers. */
    if (len > 0 && (size_t)len < sizeof line &&
        ckjit__file_append(r->file_path, line, (size_t)len, 0600, CKJIT_FILE_NEW_LINE, &e) !=
            CKJIT_SUCCESS)
      CKJIT_WARN("CKJIT_TUNE: cannot record in %s: %s (kept for this process)", r->file_path,
                 e.err ? strerror(e.err) : "short write");
    ckjit__error_quiet(quiet);
  }
  pthread_mutex_unlock(&r->lock);
}
