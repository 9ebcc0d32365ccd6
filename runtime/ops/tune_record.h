/* CKJIT_TUNE's record, shared by the op families that time candidates
 * (gemm/tune.c, attention/tune.c): per family, the winner measured for
 * each shape class, kept in memory and in `<cache dir>/<family>-tune.txt`
 * so that later processes use it without timing again.
 *
 * Each family owns one tune_record (TUNE_RECORD_INIT): its own file, table
 * and "anything recorded?" flag, so a family without winners skips its
 * lookups even where another family has some, and one family's torn or
 * edited file never costs another's winners.  A winner is four integers
 * whose meaning is the family's; the family's `valid` says which values a
 * file line or a store may hold.
 *
 * The file is append-only, one line per measurement:
 *   ckjit-<family>-tune 1 <class> <v0> <v1> <v2> <v3>
 * (`1` is the format version; the class names the arch and has no
 * whitespace).  A later line for the same class wins; lines that do not
 * parse, hold another version or values `valid` refuses are ignored, so a
 * torn or edited file costs at most a re-measurement.  Each line is one
 * write() on an O_APPEND descriptor (ckjit__file_append,
 * cache/atomic_file.h, the one file writer), so concurrent processes do
 * not interleave.  The GEMM's lines have kept this form since it was the
 * only family ("ckjit-gemm-tune 1 ..." in gemm-tune.txt). */
#ifndef CKJIT_RUNTIME_OPS_TUNE_RECORD_H
#define CKJIT_RUNTIME_OPS_TUNE_RECORD_H

#include <pthread.h>
#include <stdatomic.h>

/* Classes a family keeps (later ones are measured again in every process
 * that meets them), and the longest class name plus its terminator. */
enum { TUNE_CHOICE_VALUES = 4, TUNE_MAX_CLASSES = 512, TUNE_CLASS_LEN = 128 };

/* A measured winner: four integers, the family's to interpret. */
typedef struct tune_choice {
  int value[TUNE_CHOICE_VALUES];
} tune_choice;

typedef struct tune_entry {
  char cls[TUNE_CLASS_LEN];
  tune_choice choice;
} tune_entry;

/* One family's record.  `family` and `valid` are the family's (set by
 * TUNE_RECORD_INIT); the rest belongs to tune_record.c, which guards it
 * with `lock` except for the two atomics its lock-free check reads. */
typedef struct tune_record {
  const char *family;                  /* names the file and tags its lines */
  int (*valid)(const tune_choice *c);  /* 1: a value this family may record */
  pthread_mutex_t lock;
  int loaded;                          /* the file was read (or there is none) */
  int n_entries;
  _Atomic int loaded_fast, any_fast;   /* published copies of loaded and n_entries > 0 */
  char file_path[4096];                /* "" until a directory is given */
  tune_entry entries[TUNE_MAX_CLASSES];
} tune_record;

/* A family's record, as a static object of its tune code. */
#define TUNE_RECORD_INIT(family_name, valid_fn) \
  { .family = (family_name), .valid = (valid_fn), .lock = PTHREAD_MUTEX_INITIALIZER }

/* CKJIT_TUNE now: -1 ("0": ignore recorded winners), 0 (unset or empty:
 * use them), 1 (anything else: also measure unknown shape classes). */
int ckjit__tune_mode(void);
/* CKJIT_TUNE as the process's first call read it: the calls' check, so
 * every family sees one setting and none reads the environment per call. */
int ckjit__tune_mode_cached(void);

/* Whether `r` has any winner (memory or `dir`'s file, read once): without
 * one a call skips the lookup.  Lock-free after the first call. */
int ckjit__tune_any(tune_record *r, const char *dir);
/* The recorded winner of shape class `cls` (memory, then `dir`'s file,
 * read once: the first directory given is the process's); `dir` NULL:
 * memory only.  Returns 1 when found. */
int ckjit__tune_lookup(tune_record *r, const char *dir, const char *cls, tune_choice *out);
/* Records a winner in memory and, when `dir` is not NULL, appends it to
 * the file.  Values `valid` refuses and class names that are empty, too
 * long or hold whitespace or control characters (they would not read back
 * from the file) are not recorded. */
void ckjit__tune_store(tune_record *r, const char *dir, const char *cls, const tune_choice *c);

#endif
