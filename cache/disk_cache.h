/* The on-disk cache: one verified file per entry under dir/xx/<key>.ckjit,
 * written to a unique temporary file and renamed into place.
 *
 * A cache handle has one writable directory (`dir`, the user cache) and up
 * to CKJIT_DISK_MAX_LAYERS read-only layers (CKJIT_CACHE_PATH, see
 * cache/layers.h) searched after it, and the settings of the remote tier
 * searched after those (CKJIT_REMOTE_CACHE, cache/remote.h).  The writable
 * directory is kept under `max_bytes` / `max_entries` by least-recently-used
 * eviction (cache/eviction.h); the mtime of an entry file is its last use. */
#ifndef CKJIT_CACHE_DISK_CACHE_H
#define CKJIT_CACHE_DISK_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "entry.h"
#include "remote.h"
#include "ckjit/ckjit.h"

#define CKJIT_PATH_MAX 1024
/* An entry path: the directory plus "/xx/<32 hex>.ckjit" (or a temp name). */
#define CKJIT_ENTRY_PATH_MAX (CKJIT_PATH_MAX + 128)

#define CKJIT_DISK_MAX_LAYERS 8
#define CKJIT_DISK_DEFAULT_MAX_BYTES (1ull << 30) /* CKJIT_CACHE_MAX_SIZE */
#define CKJIT_DISK_DEFAULT_MAX_ENTRIES 50000u     /* CKJIT_CACHE_MAX_ENTRIES */
/* A verified hit sets the entry's mtime to now unless it is already this
 * recent (seconds): the mtime is the last use, to the minute. */
#define CKJIT_DISK_TOUCH_GRANULARITY_S 60

/* This process's running estimate of the writable directory's size, so the
 * directory is only scanned when it may be over its bounds
 * (cache/eviction.c; every field is accessed atomically). */
typedef struct ckjit_disk_usage {
  uint64_t bytes;   /* estimated entry bytes in `dir` */
  uint64_t entries; /* estimated entry files in `dir` */
  uint32_t stores;  /* stores since the estimate was last sampled */
  int sampled;      /* an estimate exists */
  int evicting;     /* an eviction is running in this process */
} ckjit_disk_usage;

typedef struct ckjit_disk_cache {
  char dir[CKJIT_PATH_MAX];
  int usable;   /* reads allowed */
  int writable; /* writes allowed (the directory is writable); a failed store fails only its
                   own entry and never clears this (see ckjit__disk_store) */
  int warned_dir_errors;   /* a store failed for the whole directory (full, read-only): warned */
  int warned_entry_errors; /* a store failed for one entry's name: warned */
  uint64_t max_bytes;   /* bound of `dir` in entry bytes, 0: none */
  uint64_t max_entries; /* bound of `dir` in entry files, 0: none */
  int n_layers;         /* read-only directories searched after `dir`, in order */
  char layers[CKJIT_DISK_MAX_LAYERS][CKJIT_PATH_MAX];
  ckjit_disk_usage usage;
  /* The remote tier searched after the layers (cache/remote.h): read with
   * the other settings (ckjit__disk_configure_env); the disk cache only
   * holds its settings, the build path (runtime/build.c) uses it. */
  ckjit_remote_config remote;
} ckjit_disk_cache;

/* The directory ckjit uses: `override`, else $CKJIT_CACHE_DIR, else
 * $XDG_CACHE_HOME/ckjit, else $HOME/.cache/ckjit.  Returns 0, or -1 with the
 * reason in the thread's error (ckjit__error_latest): none of them set, or
 * the path they give does not fit `len` (the message names the setting, its
 * length and the limit). */
int ckjit__disk_default_dir(const char *override, char *out, size_t len);

/* Creates `dir` (mode 0700) when missing and checks it is safe: owned by us,
 * not group/world-writable, a real directory.  An unsafe or unusable
 * directory yields usable = writable = 0 and one warning (never a failure).
 * Limits start at the defaults; no layers. */
void ckjit__disk_open(ckjit_disk_cache *c, const char *dir);

/* Path of an entry file in the writable directory. */
void ckjit__disk_entry_path(const ckjit_disk_cache *c, const ckjit_key *key, char *out, size_t len);

/* Looks an entry up in the writable directory, then in each layer.  Returns
 * 1 on a verified hit (payload malloc'ed, caller frees), 0 on a miss.  An
 * entry that fails the acceptance rule (cache/entry_accept.h) is a miss,
 * with a warning, and counts as a reject.  A hit in the writable directory
 * sets the entry's mtime to now (best effort, see
 * CKJIT_DISK_TOUCH_GRANULARITY_S).  In the writable directory, a
 * subdirectory of ours that is writable by group or others has those bits
 * removed (with a warning) rather than being refused forever; layers are
 * never written to. */
int ckjit__disk_load(ckjit_disk_cache *c, const ckjit_key *key, void **payload, size_t *size,
                     ckjit_entry_meta *meta);

/* Stores an entry atomically (temp file, fsync, rename over any entry of
 * the key: the one file writer,
 * ckjit__file_write_at of cache/atomic_file.h) into the writable
 * directory, then evicts least-recently-used entries when the directory may
 * be over its bounds (cache/eviction.h).  The payload must pass the rule
 * every reader applies (cache/entry_accept.h, cache/payload_check.h).
 * Returns CKJIT_SUCCESS when this entry is on disk, else CKJIT_ERROR_CACHE
 * with the reason: the caller goes on from memory.  A failure fails this
 * entry only: later stores try again (a full disk heals by itself, a bad
 * name fails its own entry); each kind of failure is warned about once. */
ckjit_status ckjit__disk_store(ckjit_disk_cache *c, const ckjit_entry_meta *meta,
                               const void *payload, size_t size);
/* The same, but the first writer of a key wins: where a verified entry of
 * the key already exists it is left in place, and its payload comes back in
 * *kept (malloc'ed, *kept_size bytes; NULL when this payload was stored).
 * A compiler may emit different bytes for one key (NVRTC does, rarely), so
 * the processes that compiled a key concurrently all load the one entry
 * that won instead of each keeping its own.  `durable` 0 skips the fsync:
 * for a copy of an entry that lives elsewhere (a remote hit), where a copy
 * torn by a crash fails every reader's checksum and is fetched again, and
 * the fsync would be most of the first call's time. */
ckjit_status ckjit__disk_store_first(ckjit_disk_cache *c, const ckjit_entry_meta *meta,
                                     const void *payload, size_t size, int durable, void **kept,
                                     size_t *kept_size);

/* Reads the entry file of `key` under the cache directory `root` (any cache
 * directory: the writable one, a layer, one being exported) and applies the
 * acceptance rule of cache/entry_accept.h (never following a symlink, never
 * repairing anything).  With `touch`, a verified entry's mtime is
 * set to now (see CKJIT_DISK_TOUCH_GRANULARITY_S).  Returns 1 with the whole
 * file in *file (malloc'ed), the decoded header in *meta (may be NULL) and
 * where the payload starts in *payload_offset (may be NULL); 0 when there is
 * no entry; -1 when there is one but it is refused (*why says why). */
int ckjit__disk_read_entry(const char *root, const ckjit_key *key, int touch, uint8_t **file,
                           size_t *file_size, ckjit_entry_meta *meta, size_t *payload_offset,
                           const char **why);

/* ---- Test hook ------------------------------------------------------------
 * When set, ckjit__disk_store calls it (through the writer's hook,
 * ckjit_file_hook of cache/atomic_file.h) before each step of a store with
 * the step's name and the path of the store's temporary file
 * ("<dir>/xx/.tmp-<32 hex key>-<pid>-<tid>-<n>", so a hook can pick a key):
 *
 *   "open-temp"  before creating the temporary file
 *   "write"      after the first half of the entry's bytes were written to it
 *                (a crash here leaves a partial temporary file)
 *   "fsync"      after all bytes were written, before fsync
 *   "rename"     after fsync and close, before renaming it over the entry
 *
 * Returning 0 lets the step run.  Returning an errno value (ENOSPC, EROFS,
 * EIO, ...) makes the store behave exactly as if that step's system call had
 * failed with it: the temporary file is removed, the store returns
 * CKJIT_ERROR_CACHE (one warning per kind of failure per handle), and the
 * next store tries again.  (ENOENT is
 * retried once, as a subdirectory removed by a concurrent `ckjit-cache clear`
 * is, so the hook is then called again.)  A hook may also raise(SIGKILL) in a
 * forked child to simulate a crash at that point.  Not thread-safe to change
 * while stores run; NULL (the default) costs one load per step. */
extern int (*ckjit__disk_fault_hook)(const char *stage, const char *path);

#endif
