/* One file holding many cache entries, to ship a prewarmed cache
 * (`ckjit-cache export FILE` / `import FILE`).
 *
 *   header   8  magic "CKJITARC"
 *            4  archive version (1, little endian like every integer here)
 *            4  reserved (0)
 *   record   8  length n of the entry (1 .. CKJIT_ARCHIVE_MAX_RECORD)
 *           16  key the entry was stored under (its file name)
 *            n  the entry file's bytes (cache/entry.h: self-verifying)
 *   ...
 *   end      8  0
 *            8  number of records
 *
 * Entries verify themselves, so the archive adds no checksum: import
 * decodes every record with ckjit__entry_decode, requires the header key to
 * equal the record's key, and writes it through ckjit__disk_store.  A bad
 * record is reported and skipped; a damaged framing (bad magic or version,
 * a length out of range, truncation, a wrong record count) stops the import
 * there. */
#ifndef CKJIT_CACHE_ARCHIVE_H
#define CKJIT_CACHE_ARCHIVE_H

#include <stdint.h>
#include <stdio.h>

#include "disk_cache.h"

#define CKJIT_ARCHIVE_MAGIC "CKJITARC"
#define CKJIT_ARCHIVE_VERSION 1u
#define CKJIT_ARCHIVE_MAX_RECORD ((uint64_t)CKJIT_ENTRY_MAX_PAYLOAD + 65536u)

/* Called once per entry: `problem` is NULL when it was exported/imported,
 * else why it was not.  `meta` is NULL when the entry did not decode. */
typedef void (*ckjit_archive_cb)(void *ctx, const char *key_hex, const ckjit_entry_meta *meta,
                                 uint64_t size, const char *problem);

typedef struct ckjit_archive_summary {
  uint64_t ok;     /* entries exported / imported */
  uint64_t bad;    /* entries that failed verification (skipped) */
  uint64_t failed; /* import: verified entries the store refused */
  uint64_t bytes;  /* entry bytes exported / imported */
  char error[2600]; /* a fatal error (I/O, framing), "" when none */
} ckjit_archive_summary;

/* Writes every verified entry of the cache directory `dir` (in key order)
 * to `out`; bad entries are reported and left out.  Returns 0 when every
 * entry was exported, 1 when some were bad, -1 on a fatal error. */
int ckjit__archive_export(const char *dir, FILE *out, ckjit_archive_cb cb, void *ctx,
                          ckjit_archive_summary *s);

/* Reads an archive from `in` and stores every verified entry into `c`.
 * Returns 0 when every record was imported, 1 when some were bad or could
 * not be stored, -1 on a fatal error (what was imported before it stays):
 * damaged framing, or a store failure that turned the cache's writes off
 * (a full or read-only disk). */
int ckjit__archive_import(ckjit_disk_cache *c, FILE *in, ckjit_archive_cb cb, void *ctx,
                          ckjit_archive_summary *s);

#endif
