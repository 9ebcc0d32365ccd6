/* The on-disk cache: one verified file per entry under dir/xx/<key>.ckjit,
 * written to a unique temporary file and renamed into place. */
#ifndef CKJIT_CACHE_DISK_CACHE_H
#define CKJIT_CACHE_DISK_CACHE_H

#include <stddef.h>
#include "entry.h"
#include "ckjit/ckjit.h"

#define CKJIT_PATH_MAX 1024
/* An entry path: the directory plus "/xx/<32 hex>.ckjit" (or a temp name). */
#define CKJIT_ENTRY_PATH_MAX (CKJIT_PATH_MAX + 128)

typedef struct ckjit_disk_cache {
  char dir[CKJIT_PATH_MAX];
  int usable;   /* reads allowed */
  int writable; /* writes allowed; cleared (with one warning) on the first write that fails */
} ckjit_disk_cache;

/* The directory ckjit uses: `override`, else $CKJIT_CACHE_DIR, else
 * $XDG_CACHE_HOME/ckjit, else $HOME/.cache/ckjit.  Returns -1 when none. */
int ckjit__disk_default_dir(const char *override, char *out, size_t len);

/* Creates `dir` (mode 0700) when missing and checks it is safe: owned by us,
 * not group/world-writable, a real directory.  An unsafe or unusable
 * directory yields usable = writable = 0 and one warning (never a failure). */
void ckjit__disk_open(ckjit_disk_cache *c, const char *dir);

/* Path of an entry file. */
void ckjit__disk_entry_path(const ckjit_disk_cache *c, const ckjit_key *key, char *out, size_t len);

/* Looks an entry up.  Returns 1 on a verified hit (payload malloc'ed, caller
 * frees), 0 on a miss.  An entry that fails verification is a miss, with a
 * warning, and counts as a reject. */
int ckjit__disk_load(ckjit_disk_cache *c, const ckjit_key *key, void **payload, size_t *size,
                     ckjit_entry_meta *meta);

/* Stores an entry atomically (temp file, fsync, rename).  Failures are
 * warned about once, turn writes off and return a status; the caller goes on
 * from memory. */
ckjit_status ckjit__disk_store(ckjit_disk_cache *c, const ckjit_entry_meta *meta,
                               const void *payload, size_t size);

#endif
