/* ckjit-cache: inspect and maintain the on-disk kernel cache.
 *
 *   ckjit-cache [--cache-dir DIR] [--json] COMMAND [ARGS]
 *   commands: info [--remote URL], ls, verify [--fix], prune [--max-size N]
 *             [--max-entries N], clear, export FILE, import FILE,
 *             push --remote URL, pull --remote URL
 *
 * Never follows a symbolic link and never touches a file whose name is not
 * one of the cache's own (entries, the writer's temporary files). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/archive.h"
#include "cache/atomic_file.h"
#include "cache/disk_cache.h"
#include "cache/eviction.h"
#include "cache/layers.h"
#include "cache/scan.h"
#include "cache/settings.h"
#include "cache_archive_cmd.h"
#include "cache_help.h"
#include "cache_listing.h"
#include "cache_remote_cmd.h"
#include "cache_repair.h"
#include "ckjit/ckjit.h"
#include "json_writer.h"

typedef struct options {
  const char *cache_dir;
  const char *command;
  const char *file; /* export/import */
  int json;
  int fix;
  const char *max_size;    /* prune */
  const char *max_entries; /* prune */
  const char *remote;      /* push, pull, info: the remote cache's URL */
} options;

/* The cache directory: --cache-dir, else the library's, else the default
 * location when the library has its disk cache disabled. */
static int resolve_dir(const options *o, char *dir, size_t len) {
  if (o->cache_dir) {
    if (!*o->cache_dir) {
      fprintf(stderr, "ckjit-cache: --cache-dir must not be empty\n");
      return -1;
    }
    if (ckjit__disk_default_dir(o->cache_dir, dir, len) != 0) {
      fprintf(stderr, "ckjit-cache: %s\n", ckjit_last_error());
      return -1;
    }
    return 0;
  }
  ckjit_device_info info;
  memset(&info, 0, sizeof info);
  ckjit_status st = ckjit_get_device_info(&info);
  if (st == CKJIT_SUCCESS && info.cache_dir[0]) {
    snprintf(dir, len, "%s", info.cache_dir);
    return 0;
  }
  if (st != CKJIT_SUCCESS)
    fprintf(stderr, "ckjit-cache: warning: ckjit_get_device_info failed (%s): %s\n",
            ckjit_status_string(st), ckjit_last_error());
  if (ckjit__disk_default_dir(NULL, dir, len) != 0) {
    fprintf(stderr, "ckjit-cache: %s\n", ckjit_last_error()); /* which setting, and why */
    return -1;
  }
  if (st == CKJIT_SUCCESS)
    fprintf(stderr,
            "ckjit-cache: note: the library's disk cache is disabled or unusable here; "
            "using %s\n",
            dir);
  return 0;
}

/* Removes one listed item, relative to descriptors opened without following
 * links, and only if it is still the file that was listed.  ENOENT (already
 * gone) counts as success.  Returns 0, or -1 with errno set. */
static int remove_item(const char *dir, const cache_item *it) {
  int root = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) return -1;
  int parent = root;
  if (it->subdir[0]) {
    parent = openat(root, it->subdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (parent < 0) {
      int e = errno;
      close(root);
      errno = e;
      return e == ENOENT ? 0 : -1;
    }
  }
  int rc = 0;
  struct stat st;
  if (fstatat(parent, it->name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    rc = errno == ENOENT ? 0 : -1;
  } else if ((uint64_t)st.st_dev != it->dev || (uint64_t)st.st_ino != it->ino) {
    errno = EAGAIN; /* replaced since it was listed: leave the new file alone */
    rc = -1;
  } else if (S_ISDIR(st.st_mode)) {
    errno = EISDIR;
    rc = -1;
  } else if (unlinkat(parent, it->name, 0) != 0 && errno != ENOENT) {
    rc = -1;
  }
  int e = errno;
  if (parent != root) close(parent);
  close(root);
  errno = e;
  return rc;
}

static const char *remove_error(int e) {
  return e == EAGAIN ? "replaced while running; left alone" : strerror(e);
}

/* ---- info ----------------------------------------------------------------- */
typedef struct layer_info {
  char dir[CKJIT_PATH_MAX];
  int ok;
  char why[256];
  uint64_t entries, bytes;
} layer_info;

/* The layers of CKJIT_CACHE_PATH as the library would take them. */
static size_t read_layers(layer_info *out, size_t max) {
  const char *list = getenv("CKJIT_CACHE_PATH");
  size_t n = 0;
  while (list && *list && n < max) {
    const char *end = strchr(list, ':');
    size_t len = end ? (size_t)(end - list) : strlen(list);
    if (len > 0) {
      layer_info *li = &out[n++];
      memset(li, 0, sizeof *li);
      snprintf(li->dir, sizeof li->dir, "%.*s", (int)(len < sizeof li->dir ? len : sizeof li->dir - 1),
               list);
      li->ok = ckjit__layer_check(li->dir, li->why, sizeof li->why) == 0;
      ckjit_scan scan;
      if (li->ok && ckjit__cache_scan(li->dir, 0, &scan) == 0) {
        li->entries = scan.count;
        li->bytes = scan.bytes;
        ckjit__cache_scan_free(&scan);
      }
    }
    if (!end) break;
    list = end + 1;
  }
  return n;
}

static double percent_of(uint64_t v, uint64_t bound) {
  return bound ? 100.0 * (double)v / (double)bound : 0.0;
}

static int cmd_info(const options *o, const char *dir) {
  cache_listing l;
  char err[1200];
  if (cache_listing_read(&l, dir, 0, err, sizeof err) != 0) {
    fprintf(stderr, "ckjit-cache: %s\n", err);
    return 1;
  }
  uint64_t max_bytes, max_entries;
  ckjit__disk_env_limits(&max_bytes, &max_entries);
  layer_info layers[CKJIT_DISK_MAX_LAYERS * 2];
  size_t n_layers = read_layers(layers, sizeof layers / sizeof layers[0]);
  if (o->json) {
    json_writer w;
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    json_string(&w, "cache_dir", dir);
    json_bool(&w, "exists", l.exists);
    json_uint(&w, "entries", l.entries);
    json_uint(&w, "bytes", l.entry_bytes);
    json_uint(&w, "max_bytes", max_bytes);
    json_uint(&w, "max_entries", max_entries);
    json_uint(&w, "temp_files", l.temps);
    json_uint(&w, "temp_bytes", l.temp_bytes);
    json_uint(&w, "other_files", l.foreign);
    json_uint(&w, "problems", l.bad);
    json_begin_array(&w, "layers");
    for (size_t i = 0; i < n_layers; i++) {
      json_begin_object(&w, NULL);
      json_string(&w, "dir", layers[i].dir);
      json_bool(&w, "usable", layers[i].ok);
      if (layers[i].ok) {
        json_uint(&w, "entries", layers[i].entries);
        json_uint(&w, "bytes", layers[i].bytes);
      } else {
        json_string(&w, "why", layers[i].why);
      }
      json_end_object(&w);
    }
    json_end_array(&w);
    json_string(&w, "library_version", ckjit_version_string());
    json_end_object(&w);
    json_finish(&w);
  } else {
    char size[32], tsize[32], msize[32];
    cache_format_size(l.entry_bytes, size, sizeof size);
    cache_format_size(l.temp_bytes, tsize, sizeof tsize);
    cache_format_size(max_bytes, msize, sizeof msize);
    printf("cache dir:    %s%s\n", dir, l.exists ? "" : " (does not exist yet)");
    printf("entries:      %zu", l.entries);
    if (max_entries) printf(" (%.1f%% of %llu)", percent_of(l.entries, max_entries),
                            (unsigned long long)max_entries);
    printf("\ntotal bytes:  %llu (%s", (unsigned long long)l.entry_bytes, size);
    if (max_bytes) printf(", %.1f%% of %s", percent_of(l.entry_bytes, max_bytes), msize);
    printf(")\n");
    char lim_entries[48];
    if (max_entries) snprintf(lim_entries, sizeof lim_entries, "%llu entries", (unsigned long long)max_entries);
    else snprintf(lim_entries, sizeof lim_entries, "no entry limit");
    printf("limits:       %s, %s\n", max_bytes ? msize : "no size limit", lim_entries);
    if (!n_layers) printf("layers:       none (CKJIT_CACHE_PATH)\n");
    for (size_t i = 0; i < n_layers; i++) {
      char lsize[32];
      cache_format_size(layers[i].bytes, lsize, sizeof lsize);
      if (layers[i].ok)
        printf("%s %s: %llu entries, %s (read-only)\n", i ? "             " : "layers:      ",
               layers[i].dir, (unsigned long long)layers[i].entries, lsize);
      else
        printf("%s %s: skipped (%s)\n", i ? "             " : "layers:      ", layers[i].dir,
               layers[i].why);
    }
    if (l.temps) printf("temp files:   %zu (%s; 'clear' or 'prune' removes them)\n", l.temps, tsize);
    if (l.foreign) printf("other files:  %zu (not ckjit's; never touched)\n", l.foreign);
    if (l.bad)
      printf("problems:     %zu (symlinks, misplaced or odd files; run 'ckjit-cache verify')\n",
             l.bad);
  }
  cache_listing_free(&l);
  return 0;
}

/* ---- ls ------------------------------------------------------------------- */
static int cmd_ls(const options *o, const char *dir) {
  cache_listing l;
  char err[1200];
  if (cache_listing_read(&l, dir, 1, err, sizeof err) != 0) {
    fprintf(stderr, "ckjit-cache: %s\n", err);
    return 1;
  }
  int64_t now = (int64_t)time(NULL);
  if (o->json) {
    json_writer w;
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    json_string(&w, "cache_dir", dir);
    cache_listing_json_entries(&w, "entries", &l, now);
    json_end_object(&w);
    json_finish(&w);
  } else {
    cache_listing_print_entries(stdout, &l, now);
    char size[32];
    cache_format_size(l.entry_bytes, size, sizeof size);
    printf("%zu entries, %s in %s\n", l.entries, size, dir);
  }
  if (l.bad)
    fprintf(stderr, "ckjit-cache: %zu bad item%s in the cache; run 'ckjit-cache verify'\n",
            l.bad, l.bad == 1 ? "" : "s");
  cache_listing_free(&l);
  return 0;
}

/* ---- verify --------------------------------------------------------------- */
static int cmd_verify(const options *o, const char *dir) {
  cache_listing l;
  char err[1200];
  if (cache_listing_read(&l, dir, 1, err, sizeof err) != 0) {
    fprintf(stderr, "ckjit-cache: %s\n", err);
    return 1;
  }
  int64_t now = (int64_t)time(NULL);
  size_t removed = 0, repaired = 0, remove_failed = 0;
  json_writer w;
  if (o->json) {
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    json_string(&w, "cache_dir", dir);
    json_begin_array(&w, "bad");
  }
  for (size_t i = 0; i < l.count; i++) {
    const cache_item *it = &l.items[i];
    if (!it->bad) continue;
    char path[300];
    cache_item_path(it, path, sizeof path);
    const char *action = "kept";
    char action_buf[200];
    if (o->fix) {
      cache_repair_result r = cache_repair_item(dir, it, action_buf, sizeof action_buf);
      action = action_buf;
      removed += r == CACHE_REPAIR_REMOVED;
      repaired += r == CACHE_REPAIR_FIXED;
      remove_failed += r == CACHE_REPAIR_FAILED;
    }
    if (o->json) {
      json_begin_object(&w, NULL);
      cache_listing_json_item_fields(&w, it, now);
      json_string(&w, "action", action);
      json_end_object(&w);
    } else {
      printf("BAD  %s: %s%s%s\n", path, it->why, o->fix ? " -> " : "", o->fix ? action : "");
    }
  }
  size_t ok = 0;
  for (size_t i = 0; i < l.count; i++)
    if (l.items[i].kind == CACHE_ITEM_ENTRY && !l.items[i].bad) ok++;
  if (o->json) {
    json_end_array(&w);
    json_uint(&w, "entries", l.entries);
    json_uint(&w, "ok", ok);
    json_uint(&w, "bad_count", l.bad);
    json_uint(&w, "removed", removed);
    json_uint(&w, "repaired", repaired);
    json_uint(&w, "remove_failed", remove_failed);
    json_uint(&w, "temp_files", l.temps);
    json_end_object(&w);
    json_finish(&w);
  } else {
    printf("%zu entries checked: %zu ok, %zu bad item%s", l.entries, ok, l.bad,
           l.bad == 1 ? "" : "s");
    if (o->fix) printf(", %zu removed, %zu repaired in place", removed, repaired);
    printf(" (%s)\n", dir);
    if (l.bad && !o->fix) printf("run 'ckjit-cache verify --fix' to repair them\n");
    if (l.temps)
      printf("%zu temporary file%s (writes in progress or left over; 'clear' removes them)\n",
             l.temps, l.temps == 1 ? "" : "s");
  }
  /* --fix succeeds when nothing bad is left (a foreign name left alone is). */
  size_t bad = o->fix ? l.bad - removed - repaired : l.bad;
  cache_listing_free(&l);
  return bad ? 1 : 0;
}

/* ---- clear ---------------------------------------------------------------- */
static int cmd_clear(const options *o, const char *dir) {
  cache_listing l;
  char err[1200];
  if (cache_listing_read(&l, dir, 0, err, sizeof err) != 0) {
    fprintf(stderr, "ckjit-cache: %s\n", err);
    return 1;
  }
  size_t entries = 0, temps = 0, failed = 0, left = 0;
  uint64_t bytes = 0;
  json_writer w;
  if (o->json) {
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    json_string(&w, "cache_dir", dir);
    json_begin_array(&w, "errors");
  }
  for (size_t i = 0; i < l.count; i++) {
    const cache_item *it = &l.items[i];
    if ((it->kind != CACHE_ITEM_ENTRY && it->kind != CACHE_ITEM_TEMP) || it->type == 'd') {
      left++;
      continue;
    }
    char path[300];
    cache_item_path(it, path, sizeof path);
    if (remove_item(dir, it) == 0) {
      if (it->kind == CACHE_ITEM_ENTRY) {
        entries++;
        bytes += it->size;
      } else {
        temps++;
      }
    } else {
      failed++;
      const char *why = remove_error(errno);
      if (o->json) {
        json_begin_object(&w, NULL);
        json_string(&w, "path", path);
        json_string(&w, "error", why);
        json_end_object(&w);
      } else {
        fprintf(stderr, "ckjit-cache: cannot remove %s/%s: %s\n", dir, path, why);
      }
    }
  }
  /* Remove the "xx" subdirectories that are now empty (rmdir fails on the
   * others, which keep their foreign files). */
  int root = l.exists ? open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
  if (root >= 0) {
    for (int s = 0; s < 256; s++) {
      char name[3];
      snprintf(name, sizeof name, "%02x", s);
      struct stat st;
      if (fstatat(root, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        (void)unlinkat(root, name, AT_REMOVEDIR);
    }
    close(root);
  }
  if (o->json) {
    json_end_array(&w);
    json_uint(&w, "removed_entries", entries);
    json_uint(&w, "removed_bytes", bytes);
    json_uint(&w, "removed_temp_files", temps);
    json_uint(&w, "left_alone", left);
    json_end_object(&w);
    json_finish(&w);
  } else {
    char size[32];
    cache_format_size(bytes, size, sizeof size);
    printf("removed %zu entr%s (%s) and %zu temporary file%s from %s\n", entries,
           entries == 1 ? "y" : "ies", size, temps, temps == 1 ? "" : "s", dir);
    if (left) printf("left %zu other item%s alone (not ckjit cache files)\n", left,
                     left == 1 ? "" : "s");
  }
  cache_listing_free(&l);
  return failed ? 1 : 0;
}

/* ---- prune --------------------------------------------------------------- */
/* The limits: --max-size / --max-entries, else the library's (environment). */
static int prune_limits(const options *o, uint64_t *max_bytes, uint64_t *max_entries) {
  ckjit__disk_env_limits(max_bytes, max_entries);
  const char *why = "";
  if (o->max_size && ckjit__parse_size(o->max_size, max_bytes, &why) != 0) {
    fprintf(stderr, "ckjit-cache: --max-size %s: %s (expected %s)\n", o->max_size, why,
            CKJIT_SIZE_GRAMMAR);
    return -1;
  }
  if (o->max_entries && ckjit__parse_count(o->max_entries, max_entries, &why) != 0) {
    fprintf(stderr, "ckjit-cache: --max-entries %s: %s\n", o->max_entries, why);
    return -1;
  }
  return 0;
}

static int cmd_prune(const options *o, const char *dir) {
  uint64_t max_bytes, max_entries;
  if (prune_limits(o, &max_bytes, &max_entries) != 0) return 2;
  ckjit_evict_report r;
  if (ckjit__disk_evict(dir, max_bytes, max_entries, 100, &r) != 0) {
    fprintf(stderr, "ckjit-cache: cannot scan %s: %s\n", dir, strerror(errno));
    return 1;
  }
  int over = (max_bytes && r.bytes_after > max_bytes) || (max_entries && r.entries_after > max_entries);
  if (o->json) {
    json_writer w;
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    json_string(&w, "cache_dir", dir);
    json_uint(&w, "max_bytes", max_bytes);
    json_uint(&w, "max_entries", max_entries);
    json_uint(&w, "entries_before", r.entries_before);
    json_uint(&w, "bytes_before", r.bytes_before);
    json_uint(&w, "removed_entries", r.removed);
    json_uint(&w, "removed_bytes", r.removed_bytes);
    json_uint(&w, "removed_temp_files", r.temps_removed);
    json_uint(&w, "skipped_in_use", r.skipped);
    json_uint(&w, "remove_failed", r.failed);
    if (r.failed) json_string(&w, "error", strerror(r.first_errno));
    json_uint(&w, "entries", r.entries_after);
    json_uint(&w, "bytes", r.bytes_after);
    json_bool(&w, "within_limits", !over);
    json_end_object(&w);
    json_finish(&w);
  } else {
    char removed[32], left[32];
    cache_format_size(r.removed_bytes, removed, sizeof removed);
    cache_format_size(r.bytes_after, left, sizeof left);
    printf("removed %llu entr%s (%s) and %llu stale temporary file%s; %llu entries, %s left in %s\n",
           (unsigned long long)r.removed, r.removed == 1 ? "y" : "ies", removed,
           (unsigned long long)r.temps_removed, r.temps_removed == 1 ? "" : "s",
           (unsigned long long)r.entries_after, left, dir);
    if (r.skipped)
      printf("%llu entr%s used or replaced while pruning were kept\n", (unsigned long long)r.skipped,
             r.skipped == 1 ? "y" : "ies");
    if (r.failed)
      fprintf(stderr, "ckjit-cache: %llu entr%s could not be removed: %s\n",
              (unsigned long long)r.failed, r.failed == 1 ? "y" : "ies", strerror(r.first_errno));
    if (over) fprintf(stderr, "ckjit-cache: the cache is still over its limits\n");
  }
  return r.failed || over ? 1 : 0;
}

/* ---- export / import (cache_archive_cmd.c) ----------------------------------- */
static int cmd_export(const options *o, const char *dir) { return cache_cmd_export(o->file, o->json, dir); }
static int cmd_import(const options *o, const char *dir) { return cache_cmd_import(o->file, o->json, dir); }

/* ---- push / pull / info --remote (cache_remote_cmd.c) ------------------------ */
static int cmd_push(const options *o, const char *dir) { return cache_cmd_push(o->remote, o->json, dir); }
static int cmd_pull(const options *o, const char *dir) { return cache_cmd_pull(o->remote, o->json, dir); }

int main(int argc, char **argv) {
  options o;
  memset(&o, 0, sizeof o);
  int help = 0, no_more_options = 0;
  const char *extra = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (no_more_options || a[0] != '-' || strcmp(a, "-") == 0) {
      if (!o.command) o.command = a;
      else if (!o.file) o.file = a;
      else if (!extra) extra = a;
      continue;
    }
    if (strcmp(a, "--") == 0) {
      no_more_options = 1;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      help = 1;
    } else if (strcmp(a, "--json") == 0) {
      o.json = 1;
    } else if (strcmp(a, "--fix") == 0) {
      o.fix = 1;
    } else if (strcmp(a, "--cache-dir") == 0 || strcmp(a, "--max-size") == 0 ||
               strcmp(a, "--max-entries") == 0 || strcmp(a, "--remote") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "ckjit-cache: %s needs a value\n", a);
        return 2;
      }
      const char **dst = a[2] == 'c'   ? &o.cache_dir
                         : a[2] == 'r' ? &o.remote
                         : a[6] == 's' ? &o.max_size
                                       : &o.max_entries;
      *dst = argv[++i];
    } else if (strncmp(a, "--remote=", 9) == 0) {
      o.remote = a + 9;
    } else if (strncmp(a, "--cache-dir=", 12) == 0) {
      o.cache_dir = a + 12;
    } else if (strncmp(a, "--max-size=", 11) == 0) {
      o.max_size = a + 11;
    } else if (strncmp(a, "--max-entries=", 14) == 0) {
      o.max_entries = a + 14;
    } else {
      fprintf(stderr, "ckjit-cache: unknown option '%s' (see --help)\n", a);
      return 2;
    }
  }
  if (help) {
    const char *text = o.command ? cache_command_help(o.command) : NULL;
    if (text) {
      fputs(text, stdout);
      fputs("\n", stdout);
      fputs(cache_common_help, stdout);
    } else {
      cache_usage(stdout);
    }
    return 0;
  }
  if (!o.command) {
    cache_usage(stderr);
    return 2;
  }
  int (*cmd)(const options *, const char *) = NULL;
  int takes_file = 0;
  if (strcmp(o.command, "info") == 0) cmd = cmd_info;
  else if (strcmp(o.command, "ls") == 0) cmd = cmd_ls;
  else if (strcmp(o.command, "verify") == 0) cmd = cmd_verify;
  else if (strcmp(o.command, "prune") == 0) cmd = cmd_prune;
  else if (strcmp(o.command, "clear") == 0) cmd = cmd_clear;
  else if (strcmp(o.command, "export") == 0) cmd = cmd_export, takes_file = 1;
  else if (strcmp(o.command, "import") == 0) cmd = cmd_import, takes_file = 1;
  else if (strcmp(o.command, "push") == 0) cmd = cmd_push;
  else if (strcmp(o.command, "pull") == 0) cmd = cmd_pull;
  else {
    fprintf(stderr,
            "ckjit-cache: unknown command '%s' (info, ls, verify, prune, clear, export, import, "
            "push, pull)\n",
            o.command);
    return 2;
  }
  if (takes_file && !o.file) {
    fprintf(stderr, "ckjit-cache: %s needs a FILE (- for %s)\n", o.command,
            cmd == cmd_export ? "stdout" : "stdin");
    return 2;
  }
  if ((!takes_file && o.file) || extra) {
    fprintf(stderr, "ckjit-cache: unexpected argument '%s' (see --help)\n", extra ? extra : o.file);
    return 2;
  }
  if (o.fix && cmd != cmd_verify) {
    fprintf(stderr, "ckjit-cache: --fix only applies to 'verify'\n");
    return 2;
  }
  if ((o.max_size || o.max_entries) && cmd != cmd_prune) {
    fprintf(stderr, "ckjit-cache: --max-size and --max-entries only apply to 'prune'\n");
    return 2;
  }
  if (o.remote && cmd != cmd_push && cmd != cmd_pull && cmd != cmd_info) {
    fprintf(stderr, "ckjit-cache: --remote only applies to 'push', 'pull' and 'info'\n");
    return 2;
  }
  if (!o.remote && (cmd == cmd_push || cmd == cmd_pull)) {
    fprintf(stderr, "ckjit-cache: %s needs --remote URL (redis://host[:port][/db] or "
                    "unix:///path/to.sock)\n",
            o.command);
    return 2;
  }
  if (cmd == cmd_info && o.remote) return cache_cmd_remote_info(o.remote, o.json);
  char dir[CKJIT_PATH_MAX];
  if (resolve_dir(&o, dir, sizeof dir) != 0) return 1;
  int rc = cmd(&o, dir);
  ckjit_shutdown();
  return rc;
}
