#include "archive.h"

#include "byte_order.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/error.h"
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

/* Reads exactly n bytes: 0, 1 at a clean end of file before any byte, -1. */
static int read_bytes(FILE *f, void *p, size_t n) {
  size_t got = fread(p, 1, n, f);
  if (got == n) return 0;
  return got == 0 && feof(f) ? 1 : -1;
}

int ckjit__archive_import(ckjit_disk_cache *c, FILE *in, ckjit_archive_cb cb, void *ctx,
                          ckjit_archive_summary *s) {
  memset(s, 0, sizeof *s);
  uint8_t head[16];
  if (read_bytes(in, head, sizeof head) != 0) return fatal(s, "not a ckjit cache archive (too short)");
  if (memcmp(head, CKJIT_ARCHIVE_MAGIC, 8) != 0) return fatal(s, "not a ckjit cache archive (bad magic)");
  if (ckjit__get_u32(head + 8) != CKJIT_ARCHIVE_VERSION || ckjit__get_u32(head + 12) != 0)
    return fatal(s, "unsupported archive version %u", ckjit__get_u32(head + 8));
  uint64_t records = 0;
  for (;;) {
    uint8_t rec[24];
    if (read_bytes(in, rec, 8) != 0) return fatal(s, "archive truncated after %llu records",
                                                  (unsigned long long)records);
    uint64_t n = ckjit__get_u64(rec);
    if (n == 0) {
      if (read_bytes(in, rec + 8, 8) != 0)
        return fatal(s, "archive truncated in its end marker");
      if (ckjit__get_u64(rec + 8) != records)
        return fatal(s, "archive holds %llu records but says %llu", (unsigned long long)records,
                     (unsigned long long)ckjit__get_u64(rec + 8));
      if (fgetc(in) != EOF) return fatal(s, "trailing bytes after the end of the archive");
      break;
    }
    if (n > CKJIT_ARCHIVE_MAX_RECORD)
      return fatal(s, "record %llu: length %llu out of range (damaged archive)",
                   (unsigned long long)records + 1, (unsigned long long)n);
    if (read_bytes(in, rec + 8, 16) != 0)
      return fatal(s, "archive truncated in record %llu", (unsigned long long)records + 1);
    uint8_t *buf = malloc((size_t)n);
    if (!buf) return fatal(s, "out of memory reading record %llu", (unsigned long long)records + 1);
    if (read_bytes(in, buf, (size_t)n) != 0) {
      free(buf);
      return fatal(s, "archive truncated in record %llu", (unsigned long long)records + 1);
    }
    records++;
    ckjit_key key;
    memcpy(key.bytes, rec + 8, 16);
    char hex[33];
    ckjit__key_hex(&key, hex);
    ckjit_entry_meta meta;
    const uint8_t *payload;
    size_t payload_size;
    const char *why = NULL;
    if (ckjit__entry_decode(buf, (size_t)n, &key, &meta, &payload, &payload_size, &why) != 0) {
      s->bad++;
      if (cb) cb(ctx, hex, NULL, n, why);
    } else if (ckjit__disk_store(c, &meta, payload, payload_size) != CKJIT_SUCCESS) {
      s->failed++;
      if (cb) cb(ctx, hex, &meta, n, ckjit__error_latest());
      if (!__atomic_load_n(&c->writable, __ATOMIC_RELAXED)) { /* writes are off: stop here */
        int rc = fatal(s, "cannot store into %s: %s", c->dir, ckjit__error_latest());
        free(buf);
        return rc;
      }
    } else {
      s->ok++;
      s->bytes += n;
      if (cb) cb(ctx, hex, &meta, n, NULL);
    }
    free(buf);
  }
  return s->bad || s->failed ? 1 : 0;
}
