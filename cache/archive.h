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
 * Entries verify themselves, so the archive adds no checksum.  Import is
 * all or nothing: it first reads the whole archive and checks its framing
 * (magic, version, lengths, the end marker's count, no trailing bytes) and
 * every record (it passes ckjit__entry_accept_bytes, the library's rule for
 * an entry's bytes and payload, and its header key equals the record's
 * key); only an archive that passes is read again and
 * stored through ckjit__disk_store.  A damaged archive, or one with a
 * single bad record, stores nothing; a store that fails midway removes
 * the entries the import had created. */
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
  uint64_t bad;    /* entries that failed verification (left out of an export; an
                      import refuses the whole archive) */
  uint64_t failed; /* import: verified entries the store refused (at most 1) */
  uint64_t bytes;  /* entry bytes exported / imported */
  char error[2600]; /* a fatal error (I/O, framing), "" when none */
} ckjit_archive_summary;

/* Writes every verified entry of the cache directory `dir` (in key order)
 * to `out`; bad entries are reported and left out.  Returns 0 when every
 * entry was exported, 1 when some were bad, -1 on a fatal error. */
int ckjit__archive_export(const char *dir, FILE *out, ckjit_archive_cb cb, void *ctx,
                          ckjit_archive_summary *s);

/* Reads an archive from `in` and stores all its entries into `c`, or none.
 * `in` is read twice: rewound when it can seek, else copied into an
 * unlinked temporary file in c->dir while it is checked (memory holds one
 * record at a time).  `cb` reports every bad record (pass 1), then every
 * stored entry and a failed store (pass 2).  Returns 0 when every record
 * was imported; 1 when the framing is sound but some records are bad
 * (s->bad of them; nothing stored); -1 on damaged framing, an I/O error or
 * a failed store (nothing stored, or what the import had stored removed
 * again; s->error says which).  s->ok is what stays imported. */
int ckjit__archive_import(ckjit_disk_cache *c, FILE *in, ckjit_archive_cb cb, void *ctx,
                          ckjit_archive_summary *s);

#endif
