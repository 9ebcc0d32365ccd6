/* ckjit-cache export / import: the commands around cache/archive.c (its
 * format and checks): the archive file written whole through the one file
 * writer (cache/atomic_file.h), the reports, --json. */
#include "cache_archive_cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/archive.h"
#include "cache/atomic_file.h"
#include "cache/disk_cache.h"
#include "cache/eviction.h"
#include "cache/scan.h"
#include "cache/settings.h"
#include "cache_listing.h"
#include "ckjit/ckjit.h"
#include "json_writer.h"

typedef struct archive_ctx {
  const char *file; /* the archive, "-": stdout / stdin */
  int json;
  json_writer *w; /* the "bad" array, with --json */
  const char *verb;
} archive_ctx;

static void archive_report(void *p, const char *key_hex, const ckjit_entry_meta *meta,
                           uint64_t size, const char *problem) {
  archive_ctx *ctx = p;
  if (!problem) return;
  if (ctx->w) {
    json_begin_object(ctx->w, NULL);
    json_string(ctx->w, "key", key_hex);
    if (meta) json_string(ctx->w, "kernel", meta->kernel);
    json_uint(ctx->w, "size", size);
    json_string(ctx->w, "why", problem);
    json_end_object(ctx->w);
  } else {
    fprintf(stderr, "BAD  %s: %s (not %s)\n", key_hex, problem, ctx->verb);
  }
}

static void archive_summary_json(json_writer *w, const ckjit_archive_summary *s) {
  json_uint(w, "ok", s->ok);
  json_uint(w, "bad_count", s->bad);
  json_uint(w, "store_failed", s->failed);
  json_uint(w, "bytes", s->bytes);
  if (s->error[0]) json_string(w, "error", s->error);
  else json_null(w, "error");
}

/* Opens the --json report of export/import: {"cache_dir", "file", "bad": [ ... */
static void archive_json_begin(json_writer *w, archive_ctx *ctx, const char *dir) {
  if (!ctx->json) return;
  json_init(w, stdout);
  json_begin_object(w, NULL);
  json_string(w, "cache_dir", dir);
  json_string(w, "file", ctx->file);
  json_begin_array(w, "bad");
  ctx->w = w;
}

int cache_cmd_export(const char *file, int json, const char *dir) {
  int to_stdout = strcmp(file, "-") == 0;
  if (to_stdout && json) {
    fprintf(stderr, "ckjit-cache: export to stdout cannot be combined with --json\n");
    return 2;
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "ckjit-cache: %s: no cache directory there\n", dir);
    return 1;
  }
  ckjit_file_stream archive;
  FILE *out = stdout;
  if (!to_stdout) {
    if (ckjit__file_stream_open(&archive, file, 0600)) {
      fprintf(stderr, "ckjit-cache: %s\n", ckjit_last_error());
      return 1;
    }
    out = archive.file;
  }
  json_writer w;
  archive_ctx ctx = {file, json, NULL, "exported"};
  archive_json_begin(&w, &ctx, dir);
  ckjit_archive_summary s;
  int rc = ckjit__archive_export(dir, out, archive_report, &ctx, &s);
  if (!to_stdout) {
    if (rc < 0) {
      ckjit__file_stream_abort(&archive);
    } else if (ckjit__file_stream_commit(&archive, CKJIT_FILE_SYNC)) {
      snprintf(s.error, sizeof s.error, "%s", ckjit_last_error());
      rc = -1;
    }
  }
  if (json) {
    json_end_array(&w);
    archive_summary_json(&w, &s);
    json_end_object(&w);
    json_finish(&w);
  } else {
    char size[32];
    cache_format_size(s.bytes, size, sizeof size);
    if (rc < 0) fprintf(stderr, "ckjit-cache: %s\n", s.error);
    else
      fprintf(to_stdout ? stderr : stdout, "exported %llu entr%s (%s) from %s to %s%s\n",
              (unsigned long long)s.ok, s.ok == 1 ? "y" : "ies", size, dir,
              to_stdout ? "stdout" : file,
              s.bad ? "; bad entries were left out (run 'ckjit-cache verify')" : "");
  }
  return rc == 0 ? 0 : 1;
}

int cache_cmd_import(const char *file, int json, const char *dir) {
  FILE *in = stdin;
  if (strcmp(file, "-") != 0 && !(in = fopen(file, "rb"))) {
    fprintf(stderr, "ckjit-cache: cannot open %s: %s\n", file, strerror(errno));
    return 1;
  }
  ckjit_disk_cache *c = malloc(sizeof *c);
  if (!c) {
    fprintf(stderr, "ckjit-cache: out of memory\n");
    if (in != stdin) fclose(in);
    return 1;
  }
  ckjit__disk_open(c, dir);
  if (!c->usable || !c->writable) {
    fprintf(stderr, "ckjit-cache: %s is not a usable, writable cache directory (see the warning "
                    "above)\n",
            dir);
    free(c);
    if (in != stdin) fclose(in);
    return 1;
  }
  c->max_bytes = c->max_entries = 0; /* no eviction of what is being imported */
  json_writer w;
  archive_ctx ctx = {file, json, NULL, "imported"};
  archive_json_begin(&w, &ctx, dir);
  ckjit_archive_summary s;
  int rc = ckjit__archive_import(c, in, archive_report, &ctx, &s);
  if (in != stdin) fclose(in);
  free(c);
  uint64_t max_bytes, max_entries;
  ckjit__disk_env_limits(&max_bytes, &max_entries);
  ckjit_scan scan;
  int over = 0;
  if (ckjit__cache_scan(dir, 0, &scan) == 0) {
    over = (max_bytes && scan.bytes > max_bytes) || (max_entries && scan.count > max_entries);
    ckjit__cache_scan_free(&scan);
  }
  if (json) {
    json_end_array(&w);
    archive_summary_json(&w, &s);
    json_bool(&w, "over_limits", over);
    json_end_object(&w);
    json_finish(&w);
  } else {
    char size[32];
    cache_format_size(s.bytes, size, sizeof size);
    if (rc != 0) fprintf(stderr, "ckjit-cache: %s: %s\n", file, s.error);
    printf("imported %llu entr%s (%s) into %s\n", (unsigned long long)s.ok,
           s.ok == 1 ? "y" : "ies", size, dir);
    if (over)
      printf("the cache is now over its limits; the library evicts the least recently used "
             "entries on its next store ('ckjit-cache prune' does it now)\n");
  }
  return rc == 0 ? 0 : 1;
}
