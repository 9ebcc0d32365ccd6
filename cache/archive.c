#include "archive.h"

#include "byte_order.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/error.h"
#include "entry_accept.h"
#include "scan.h"


static int fatal(ckjit_archive_summary *s, const char *fmt, ...) CKJIT_PRINTF(2, 3);
static int fatal(ckjit_archive_summary *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->error, sizeof s->error, fmt, ap);
  va_end(ap);
  return -1;
}

static int write_bytes(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }

int ckjit__archive_export(const char *dir, FILE *out, ckjit_archive_cb cb, void *ctx,
                          ckjit_archive_summary *s) {
  memset(s, 0, sizeof *s);
  ckjit_scan scan;
  if (ckjit__cache_scan(dir, 0, &scan) != 0) return fatal(s, "cannot read %s: %s", dir, strerror(errno));
  uint8_t head[16];
  memcpy(head, CKJIT_ARCHIVE_MAGIC, 8);
  ckjit__put_u32(head + 8, CKJIT_ARCHIVE_VERSION);
  ckjit__put_u32(head + 12, 0);
  int rc = write_bytes(out, head, sizeof head);
  for (size_t i = 0; rc == 0 && i < scan.count; i++) {
    const ckjit_key *key = &scan.entries[i].key;
    char hex[33];
    ckjit__key_hex(key, hex);
    uint8_t *file;
    size_t size;
    ckjit_entry_meta meta;
    const char *why;
    int got = ckjit__disk_read_entry(dir, key, 0, &file, &size, &meta, NULL, &why);
    if (got == 0) continue; /* removed since the scan */
    if (got < 0) {
      s->bad++;
      if (cb) cb(ctx, hex, NULL, scan.entries[i].size, why);
      continue;
    }
    uint8_t rec[24];
    ckjit__put_u64(rec, size);
    memcpy(rec + 8, key->bytes, 16);
    rc = write_bytes(out, rec, sizeof rec) || write_bytes(out, file, size) ? -1 : 0;
    free(file);
    if (rc == 0) {
      s->ok++;
      s->bytes += size;
      if (cb) cb(ctx, hex, &meta, size, NULL);
    }
  }
  ckjit__cache_scan_free(&scan);
  uint8_t end[16];
  ckjit__put_u64(end, 0);
  ckjit__put_u64(end + 8, s->ok);
  if (rc == 0) rc = write_bytes(out, end, sizeof end);
  if (rc == 0 && fflush(out) != 0) rc = -1;
  if (rc != 0 || ferror(out)) return fatal(s, "cannot write the archive: %s", strerror(errno));
  return s->bad ? 1 : 0;
}

/* ---- import ---------------------------------------------------------------
 * Two passes, so that an archive is imported whole or not at all: the first
 * reads the archive to its end and checks everything (framing, end marker,
 * record count, no trailing bytes, every record through accept_record); only
 * then does the second read it again and store its entries.  A stream that
 * cannot be read twice (a pipe) is copied into an unlinked temporary file in
 * the cache directory during the first pass (the entries go there anyway),
 * so memory holds one record at a time whatever the archive's size. */

/* Bytes read per step into a record's buffer: a record grows its buffer as
 * its bytes arrive, so a damaged length costs no more memory than the bytes
 * actually present. */
#define READ_STEP ((size_t)1 << 20)

typedef struct archive_reader {
  FILE *in;
  FILE *spool;     /* pass 1 of a stream that cannot be rewound: a copy of it, else NULL */
  uint8_t *buf;    /* the current record's entry bytes */
  size_t cap;
  uint64_t records; /* records read so far in this pass */
} archive_reader;

/* Reads exactly n bytes, copying them into the spool when there is one.
 * Returns 0, 1 at a clean end of file before any byte, or -1 with s->error
 * set: a read or spool error, or else "archive truncated <where>". */
static int read_bytes(archive_reader *r, ckjit_archive_summary *s, void *p, size_t n,
                      const char *where) {
  size_t got = fread(p, 1, n, r->in);
  if (got != n) {
    if (ferror(r->in)) return fatal(s, "cannot read the archive: %s", strerror(errno));
    if (got == 0) return 1;
    return fatal(s, "archive truncated %s", where);
  }
  if (r->spool && fwrite(p, 1, n, r->spool) != n)
    return fatal(s, "cannot copy the archive into a temporary file: %s", strerror(errno));
  return 0;
}

/* read_bytes where the end of the file is a truncation too. */
static int read_all(archive_reader *r, ckjit_archive_summary *s, void *p, size_t n,
                    const char *where) {
  int got = read_bytes(r, s, p, n, where);
  return got == 1 ? fatal(s, "archive truncated %s", where) : got;
}

/* Reads the next record into r->buf: 1 with its key and length, 0 at a
 * valid end of the archive, -1 on damaged framing or an I/O error (s->error
 * says which). */
static int next_record(archive_reader *r, ckjit_archive_summary *s, ckjit_key *key, size_t *size) {
  uint8_t rec[24];
  unsigned long long at = (unsigned long long)r->records + 1;
  char where[64];
  snprintf(where, sizeof where, "after %llu records", at - 1);
  if (read_all(r, s, rec, 8, where) != 0) return -1;
  uint64_t n = ckjit__get_u64(rec);
  if (n == 0) {
    if (read_all(r, s, rec + 8, 8, "in its end marker") != 0) return -1;
    if (ckjit__get_u64(rec + 8) != r->records)
      return fatal(s, "archive holds %llu records but its end marker says %llu", at - 1,
                   (unsigned long long)ckjit__get_u64(rec + 8));
    if (fgetc(r->in) != EOF) return fatal(s, "trailing bytes after the end of the archive");
    return 0;
  }
  if (n > CKJIT_ARCHIVE_MAX_RECORD)
    return fatal(s, "record %llu: length %llu out of range (damaged archive)", at,
                 (unsigned long long)n);
  snprintf(where, sizeof where, "in record %llu", at);
  if (read_all(r, s, rec + 8, 16, where) != 0) return -1;
  memcpy(key->bytes, rec + 8, 16);
  for (size_t done = 0; done < n;) {
    size_t step = (size_t)n - done < READ_STEP ? (size_t)n - done : READ_STEP;
    if (done + step > r->cap) {
      size_t cap = r->cap * 2 > done + step ? r->cap * 2 : done + step;
      if (cap > n) cap = (size_t)n;
      uint8_t *grown = realloc(r->buf, cap);
      if (!grown) return fatal(s, "out of memory reading record %llu", at);
      r->buf = grown;
      r->cap = cap;
    }
    if (read_all(r, s, r->buf + done, step, where) != 0) return -1;
    done += step;
  }
  r->records++;
  *size = (size_t)n;
  return 1;
}

/* The one place where an archive record is accepted or refused, used by
 * both passes: the entry must pass the bytes part of the library's
 * acceptance rule (ckjit__entry_accept_bytes, cache/entry_accept.h: magic,
 * version, checksums, sizes, a payload that is a code object for its arch
 * defining its kernel) and be stored under the key its header names.  Any
 * further check on entries belongs in that rule, which every reader
 * shares.  Returns NULL when accepted, else why not. */
static const char *accept_record(const uint8_t *buf, size_t size, const ckjit_key *key,
                                 ckjit_entry_meta *meta, const uint8_t **payload,
                                 size_t *payload_size) {
  const char *why = NULL;
  if (ckjit__entry_accept_bytes(buf, size, key, meta, payload, payload_size, &why) != 0)
    return why ? why : "not a valid entry";
  return NULL;
}

/* Pass 1: reads the whole archive and checks every record; reports each bad
 * one.  Returns 0 when all is well, 1 when some records are bad, -1 on
 * damaged framing or an I/O error. */
static int check_archive(archive_reader *r, ckjit_archive_cb cb, void *ctx,
                         ckjit_archive_summary *s) {
  for (;;) {
    ckjit_key key;
    size_t size;
    int got = next_record(r, s, &key, &size);
    if (got <= 0) return got < 0 ? -1 : s->bad ? 1 : 0;
    ckjit_entry_meta meta;
    const uint8_t *payload;
    size_t payload_size;
    const char *why = accept_record(r->buf, size, &key, &meta, &payload, &payload_size);
    if (why) {
      s->bad++;
      char hex[33];
      ckjit__key_hex(&key, hex);
      if (cb) cb(ctx, hex, NULL, size, why);
    }
  }
}

/* Keys whose entry files this import created (none was there before), so a
 * failed second pass can remove them again. */
typedef struct created_keys {
  ckjit_key *keys;
  size_t n, cap;
} created_keys;

static int remember_created(created_keys *k, const ckjit_key *key) {
  if (k->n == k->cap) {
    size_t cap = k->cap ? k->cap * 2 : 64;
    ckjit_key *grown = realloc(k->keys, cap * sizeof *grown);
    if (!grown) return -1;
    k->keys = grown;
    k->cap = cap;
  }
  k->keys[k->n++] = *key;
  return 0;
}

/* Undoes a failed second pass: removes the entry files it created.  Entries
 * it replaced held the same key, hence the same code, and stay. */
static void remove_created(const ckjit_disk_cache *c, const created_keys *k,
                           ckjit_archive_summary *s) {
  size_t kept = 0;
  for (size_t i = 0; i < k->n; i++) {
    char path[CKJIT_ENTRY_PATH_MAX];
    ckjit__disk_entry_path(c, &k->keys[i], path, sizeof path);
    if (unlink(path) != 0 && errno != ENOENT) kept++;
  }
  size_t len = strlen(s->error);
  if (kept)
    snprintf(s->error + len, sizeof s->error - len,
             "; %zu of the %zu entries this import had stored could not be removed", kept, k->n);
  else
    snprintf(s->error + len, sizeof s->error - len, "; nothing was imported");
}

/* Pass 2: reads the archive again from the start and stores every entry.
 * The archive was checked, so a record refused now means it changed
 * meanwhile; that, and a store that fails, undo the pass (remove_created).
 * Returns 0, or -1 (s->error says why). */
static int store_archive(ckjit_disk_cache *c, archive_reader *r, uint64_t checked,
                         ckjit_archive_cb cb, void *ctx, ckjit_archive_summary *s) {
  created_keys created = {NULL, 0, 0};
  int rc = 0;
  for (;;) {
    ckjit_key key;
    size_t size;
    int got = next_record(r, s, &key, &size);
    if (got < 0) {
      size_t len = strlen(s->error);
      snprintf(s->error + len, sizeof s->error - len, " (reading the archive a second time)");
      rc = -1;
      break;
    }
    if (got == 0) {
      if (r->records != checked) {
        fatal(s, "the archive changed during the import (%llu records, then %llu)",
              (unsigned long long)checked, (unsigned long long)r->records);
        rc = -1;
      }
      break;
    }
    char hex[33];
    ckjit__key_hex(&key, hex);
    ckjit_entry_meta meta;
    const uint8_t *payload;
    size_t payload_size;
    const char *why = accept_record(r->buf, size, &key, &meta, &payload, &payload_size);
    if (why) {
      s->bad++;
      if (cb) cb(ctx, hex, NULL, size, why);
      rc = fatal(s, "record %llu (%s) changed during the import: %s",
                 (unsigned long long)r->records, hex, why);
      break;
    }
    char path[CKJIT_ENTRY_PATH_MAX];
    ckjit__disk_entry_path(c, &key, path, sizeof path);
    struct stat st;
    int existed = lstat(path, &st) == 0;
    if (!existed && remember_created(&created, &key) != 0) {
      rc = fatal(s, "out of memory");
      break;
    }
    if (ckjit__disk_store(c, &meta, payload, payload_size) != CKJIT_SUCCESS) {
      s->failed++;
      if (cb) cb(ctx, hex, &meta, size, ckjit__error_latest());
      rc = fatal(s, "cannot store %s into %s: %s", hex, c->dir, ckjit__error_latest());
      break;
    }
    s->ok++;
    s->bytes += size;
    if (cb) cb(ctx, hex, &meta, size, NULL);
  }
  if (rc != 0) {
    remove_created(c, &created, s);
    s->ok = 0;
    s->bytes = 0;
  }
  free(created.keys);
  return rc;
}

/* An unlinked temporary file in `dir`, or NULL (errno set). */
static FILE *open_spool(const char *dir) {
  char path[CKJIT_ENTRY_PATH_MAX];
  if (snprintf(path, sizeof path, "%s/.tmp-import-XXXXXX", dir) >= (int)sizeof path) {
    errno = ENAMETOOLONG;
    return NULL;
  }
  int fd = mkstemp(path);
  if (fd < 0) return NULL;
  unlink(path); /* nothing to clean up after a crash */
  FILE *f = fdopen(fd, "w+b");
  if (!f) {
    int e = errno;
    close(fd);
    errno = e;
  }
  return f;
}

int ckjit__archive_import(ckjit_disk_cache *c, FILE *in, ckjit_archive_cb cb, void *ctx,
                          ckjit_archive_summary *s) {
  memset(s, 0, sizeof *s);
  archive_reader r = {in, NULL, NULL, 0, 0};
  off_t start = ftello(in);
  if (start < 0) { /* a pipe: keep a copy to read it twice */
    if (!(r.spool = open_spool(c->dir)))
      return fatal(s, "cannot create a temporary file in %s for the archive: %s", c->dir,
                   strerror(errno));
  }
  uint8_t head[16];
  int got = read_bytes(&r, s, head, sizeof head, "(too short to be a ckjit cache archive)");
  int rc;
  if (got < 0) rc = -1;
  else if (got != 0) rc = fatal(s, "not a ckjit cache archive (empty)");
  else if (memcmp(head, CKJIT_ARCHIVE_MAGIC, 8) != 0)
    rc = fatal(s, "not a ckjit cache archive (bad magic)");
  else if (ckjit__get_u32(head + 8) != CKJIT_ARCHIVE_VERSION || ckjit__get_u32(head + 12) != 0)
    rc = fatal(s, "unsupported archive version %u", ckjit__get_u32(head + 8));
  else
    rc = check_archive(&r, cb, ctx, s);
  if (rc == 1)
    fatal(s, "%llu of %llu entries are bad: nothing was imported", (unsigned long long)s->bad,
          (unsigned long long)r.records);
  if (rc == 0 && r.spool && fflush(r.spool) != 0)
    rc = fatal(s, "cannot copy the archive into a temporary file: %s", strerror(errno));
  if (rc == 0) {
    uint64_t checked = r.records;
    if (r.spool) {
      r.in = r.spool;
      r.spool = NULL;
      rewind(r.in);
    } else if (fseeko(in, start, SEEK_SET) != 0) {
      rc = fatal(s, "cannot read the archive again: %s", strerror(errno));
    }
    r.records = 0;
    if (rc == 0 && fseeko(r.in, (off_t)sizeof head, SEEK_CUR) != 0)
      rc = fatal(s, "cannot read the archive again: %s", strerror(errno));
    if (rc == 0) rc = store_archive(c, &r, checked, cb, ctx, s);
  }
  if (r.in != in) fclose(r.in);
  if (r.spool) fclose(r.spool);
  free(r.buf);
  return rc;
}
