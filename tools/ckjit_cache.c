/* ckjit-cache: inspect and maintain the on-disk kernel cache.
 *
 *   ckjit-cache [--cache-dir DIR] [--json] info|ls|verify [--fix]|clear
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

#include "cache/disk_cache.h"
#include "cache_listing.h"
#include "ckjit/ckjit.h"
#include "json_writer.h"

static void usage(FILE *out) {
  fputs(
      "usage: ckjit-cache [options] COMMAND\n"
      "\n"
      "Inspects and maintains the ckjit on-disk kernel cache\n"
      "(<cache-dir>/xx/<32-hex-key>.ckjit).\n"
      "\n"
      "commands:\n"
      "  info       cache directory, number of entries, total bytes\n"
      "  ls         one line per entry: key, kernel, arch, size, age\n"
      "  verify     read and verify every entry (header, checksums, key = file name);\n"
      "             prints the bad ones; exits 1 if there are any\n"
      "  clear      removes every entry and leftover temporary file (nothing else)\n"
      "\n"
      "options:\n"
      "  --cache-dir DIR  the cache directory (default: the one the library uses:\n"
      "                   CKJIT_CACHE_DIR, XDG_CACHE_HOME/ckjit, ~/.cache/ckjit)\n"
      "  --fix            with verify: delete the bad entries\n"
      "  --json           machine-readable output on stdout\n"
      "  -h, --help       this help\n"
      "\n"
      "Symbolic links are never followed; one inside the cache is reported as bad.\n"
      "Exit status: 0 success, 1 failure (or bad entries found by verify), 2 usage error.\n",
      out);
}

typedef struct options {
  const char *cache_dir;
  const char *command;
  int json;
  int fix;
} options;

/* The cache directory: --cache-dir, else the library's, else the default
 * location when the library has its disk cache disabled. */
static int resolve_dir(const options *o, char *dir, size_t len) {
  if (o->cache_dir) {
    if (!*o->cache_dir) {
      fprintf(stderr, "ckjit-cache: --cache-dir must not be empty\n");
      return -1;
    }
    snprintf(dir, len, "%s", o->cache_dir);
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
    fprintf(stderr,
            "ckjit-cache: no cache directory (set CKJIT_CACHE_DIR, XDG_CACHE_HOME or HOME, "
            "or pass --cache-dir)\n");
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
static int cmd_info(const options *o, const char *dir) {
  cache_listing l;
  char err[1200];
  if (cache_listing_read(&l, dir, 0, err, sizeof err) != 0) {
    fprintf(stderr, "ckjit-cache: %s\n", err);
    return 1;
  }
  if (o->json) {
    json_writer w;
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    json_string(&w, "cache_dir", dir);
    json_bool(&w, "exists", l.exists);
    json_uint(&w, "entries", l.entries);
    json_uint(&w, "bytes", l.entry_bytes);
    json_uint(&w, "temp_files", l.temps);
    json_uint(&w, "temp_bytes", l.temp_bytes);
    json_uint(&w, "other_files", l.foreign);
    json_uint(&w, "problems", l.bad);
    json_string(&w, "library_version", ckjit_version_string());
    json_end_object(&w);
    json_finish(&w);
  } else {
    char size[32], tsize[32];
    cache_format_size(l.entry_bytes, size, sizeof size);
    cache_format_size(l.temp_bytes, tsize, sizeof tsize);
    printf("cache dir:    %s%s\n", dir, l.exists ? "" : " (does not exist yet)");
    printf("entries:      %zu\n", l.entries);
    printf("total bytes:  %llu (%s)\n", (unsigned long long)l.entry_bytes, size);
    if (l.temps) printf("temp files:   %zu (%s; 'clear' removes them)\n", l.temps, tsize);
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
/* Whether --fix may delete a bad item: anything named like the cache's own
 * files that is not a directory (a symlink is removed, never its target). */
static int fixable(const cache_item *it) {
  return it->kind != CACHE_ITEM_FOREIGN && it->type != 'd';
}

static int cmd_verify(const options *o, const char *dir) {
  cache_listing l;
  char err[1200];
  if (cache_listing_read(&l, dir, 1, err, sizeof err) != 0) {
    fprintf(stderr, "ckjit-cache: %s\n", err);
    return 1;
  }
  int64_t now = (int64_t)time(NULL);
  size_t removed = 0, remove_failed = 0;
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
      if (!fixable(it)) {
        action = "left alone (not a cache file)";
      } else if (remove_item(dir, it) == 0) {
        action = "removed";
        removed++;
      } else {
        snprintf(action_buf, sizeof action_buf, "could not remove: %s", remove_error(errno));
        action = action_buf;
        remove_failed++;
      }
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
    json_uint(&w, "remove_failed", remove_failed);
    json_uint(&w, "temp_files", l.temps);
    json_end_object(&w);
    json_finish(&w);
  } else {
    printf("%zu entries checked: %zu ok, %zu bad item%s", l.entries, ok, l.bad,
           l.bad == 1 ? "" : "s");
    if (o->fix) printf(", %zu removed", removed);
    printf(" (%s)\n", dir);
    if (l.bad && !o->fix) printf("run 'ckjit-cache verify --fix' to delete the bad entries\n");
    if (l.temps)
      printf("%zu temporary file%s (writes in progress or left over; 'clear' removes them)\n",
             l.temps, l.temps == 1 ? "" : "s");
  }
  size_t bad = l.bad;
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

int main(int argc, char **argv) {
  options o;
  memset(&o, 0, sizeof o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "--json") == 0) {
      o.json = 1;
    } else if (strcmp(a, "--fix") == 0) {
      o.fix = 1;
    } else if (strcmp(a, "--cache-dir") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "ckjit-cache: --cache-dir needs a directory\n");
        return 2;
      }
      o.cache_dir = argv[++i];
    } else if (strncmp(a, "--cache-dir=", 12) == 0) {
      o.cache_dir = a + 12;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "ckjit-cache: unknown option '%s' (see --help)\n", a);
      return 2;
    } else if (!o.command) {
      o.command = a;
    } else {
      fprintf(stderr, "ckjit-cache: unexpected argument '%s' (see --help)\n", a);
      return 2;
    }
  }
  if (!o.command) {
    usage(stderr);
    return 2;
  }
  int (*cmd)(const options *, const char *) = NULL;
  if (strcmp(o.command, "info") == 0) cmd = cmd_info;
  else if (strcmp(o.command, "ls") == 0) cmd = cmd_ls;
  else if (strcmp(o.command, "verify") == 0) cmd = cmd_verify;
  else if (strcmp(o.command, "clear") == 0) cmd = cmd_clear;
  else {
    fprintf(stderr, "ckjit-cache: unknown command '%s' (info, ls, verify, clear)\n", o.command);
    return 2;
  }
  if (o.fix && cmd != cmd_verify) {
    fprintf(stderr, "ckjit-cache: --fix only applies to 'verify'\n");
    return 2;
  }
  char dir[CKJIT_PATH_MAX];
  if (resolve_dir(&o, dir, sizeof dir) != 0) return 1;
  int rc = cmd(&o, dir);
  ckjit_shutdown();
  return rc;
}
