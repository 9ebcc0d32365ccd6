#include "cache_listing.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/entry.h"
#include "cache/entry_accept.h"
#include "cache/key.h"
#include "cache/layout.h"

/* The names are the library's own (cache/layout.h). */
int cache_name_is_subdir(const char *name) { return ckjit__cache_name_is_subdir(name); }
int cache_name_is_entry(const char *name, char key_hex[33]) {
  return ckjit__cache_name_is_entry(name, key_hex);
}
int cache_name_is_temp(const char *name) { return ckjit__cache_name_is_temp(name); }

static void copy_str(char *dst, size_t len, const char *src) {
  size_t n = strlen(src);
  if (n >= len) n = len - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* Replaces control characters, so a hostile name cannot drive the terminal. */
static void sanitize(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s == 0x7F) *s = '?';
}

static char type_of(mode_t m) {
  return S_ISREG(m) ? 'f' : S_ISLNK(m) ? 'l' : S_ISDIR(m) ? 'd' : '?';
}

static cache_item *add_item(cache_listing *l, cache_item_kind kind, const char *subdir,
                            const char *name, const struct stat *st) {
  if (l->count == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    cache_item *items = realloc(l->items, cap * sizeof *items);
    if (!items) return NULL;
    l->items = items;
    l->cap = cap;
  }
  cache_item *it = &l->items[l->count++];
  memset(it, 0, sizeof *it);
  it->kind = kind;
  copy_str(it->subdir, sizeof it->subdir, subdir);
  copy_str(it->name, sizeof it->name, name);
  it->type = type_of(st->st_mode);
  it->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
  it->mtime = (int64_t)st->st_mtime;
  it->dev = (uint64_t)st->st_dev;
  it->ino = (uint64_t)st->st_ino;
  return it;
}

static void set_bad(cache_item *it, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_bad(cache_item *it, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  it->bad = 1;
  if (!it->refusal) it->refusal = CKJIT_REFUSAL_CONTENT;
  vsnprintf(it->why, sizeof it->why, fmt, ap);
  va_end(ap);
}

/* Marks an item refused by the acceptance rule, with the rule's words. */
static void set_refused(cache_item *it, ckjit_refusal refusal, const char *why) {
  it->refusal = refusal;
  set_bad(it, "%s", why);
}

/* "elementwise:dtype=bf16,op=gelu_tanh,..." -> "elementwise gelu_tanh bf16". */
static void describe_op(const char *spec, char *out, size_t len) {
  size_t fam = strcspn(spec, ":");
  const char *op = strstr(spec, ",op="), *dt = strstr(spec, ":dtype=");
  if (!op && !strncmp(spec + fam, ":op=", 4)) op = spec + fam;
  int n = snprintf(out, len, "%.*s", (int)fam, spec);
  if (op && n >= 0 && (size_t)n < len) {
    op += 4;
    n += snprintf(out + n, len - (size_t)n, " %.*s", (int)strcspn(op, ","), op);
  }
  if (dt && n >= 0 && (size_t)n < len) {
    dt += 7;
    snprintf(out + n, len - (size_t)n, " %.*s", (int)strcspn(dt, ","), dt);
  }
  if (!spec[0]) snprintf(out, len, "-");
}

/* Reads an entry file relative to the subdirectory descriptor and applies
 * the library's acceptance rule to it (the very function its reads use). */
static void verify_entry(int sub, uid_t owner, cache_item *it) {
  ckjit_key key;
  if (ckjit__key_parse(it->key, &key) != 0) {
    set_bad(it, "not an entry name");
    return;
  }
  ckjit_entry_read r;
  int rc = ckjit__entry_read_at(sub, it->name, &key, owner, 0, &r);
  if (r.opened) {
    it->size = r.st.st_size > 0 ? (uint64_t)r.st.st_size : 0;
    it->dev = (uint64_t)r.st.st_dev;
    it->ino = (uint64_t)r.st.st_ino;
    it->mtime = (int64_t)r.st.st_mtime;
  }
  if (rc == 0) return; /* removed meanwhile (eviction): not bad */
  if (rc < 0) {
    set_refused(it, r.refusal, r.why);
    return;
  }
  ckjit_entry_meta meta = r.meta;
  free(r.file);
  meta.arch[sizeof meta.arch - 1] = '\0';
  meta.kernel[sizeof meta.kernel - 1] = '\0';
  it->decoded = 1;
  copy_str(it->arch, sizeof it->arch, meta.arch);
  copy_str(it->kernel, sizeof it->kernel, meta.kernel);
  copy_str(it->spec, sizeof it->spec, meta.spec);
  sanitize(it->arch);
  sanitize(it->kernel);
  sanitize(it->spec);
  describe_op(it->spec, it->op, sizeof it->op);
  it->payload_size = r.payload_size;
}

/* Scans one "xx" subdirectory (already known to be a real directory). */
static int scan_subdir(cache_listing *l, int root, uid_t owner, const char *subdir, int decode,
                       int listed) {
  int sub = openat(root, subdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) {
    int e = errno;
    if (e == ENOENT || listed) return 0; /* removed meanwhile, or already a bad item */
    struct stat st;
    memset(&st, 0, sizeof st);
    (void)fstatat(root, subdir, &st, AT_SYMLINK_NOFOLLOW);
    cache_item *it = add_item(l, CACHE_ITEM_SUBDIR, "", subdir, &st);
    if (!it) return -1;
    set_bad(it, "cannot open directory: %s", strerror(e));
    l->bad++;
    return 0;
  }
  int dfd = dup(sub);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d) {
    if (dfd >= 0) close(dfd);
    close(sub);
    return -1;
  }
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *name = de->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    struct stat st;
    if (fstatat(sub, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue; /* vanished */
    char key[33];
    cache_item_kind kind = cache_name_is_entry(name, key) ? CACHE_ITEM_ENTRY
                         : cache_name_is_temp(name)       ? CACHE_ITEM_TEMP
                                                          : CACHE_ITEM_FOREIGN;
    cache_item *it = add_item(l, kind, subdir, name, &st);
    if (!it) {
      rc = -1;
      break;
    }
    if (kind == CACHE_ITEM_ENTRY) {
      copy_str(it->key, sizeof it->key, key);
      struct statx sx;
      if (statx(sub, name, AT_SYMLINK_NOFOLLOW, STATX_BTIME, &sx) == 0 && (sx.stx_mask & STATX_BTIME))
        it->btime = (int64_t)sx.stx_btime.tv_sec;
      if (S_ISREG(st.st_mode)) {
        l->entries++;
        l->entry_bytes += it->size;
      }
      const char *why;
      ckjit_refusal r = ckjit__entry_file_check(&st, owner, &why);
      if (r != CKJIT_REFUSAL_NONE) {
        set_refused(it, r, why);
      } else if (strncmp(key, subdir, 2) != 0) {
        /* The library never looks there: dead weight at an entry name. */
        set_bad(it, "misplaced: its key belongs in subdirectory %.2s", key);
      } else if (decode) {
        verify_entry(sub, owner, it);
      }
    } else if (kind == CACHE_ITEM_TEMP) {
      l->temps++;
      l->temp_bytes += it->size;
      if (S_ISLNK(st.st_mode)) set_bad(it, "symbolic link (never followed)");
    } else {
      l->foreign++;
      if (S_ISLNK(st.st_mode)) set_bad(it, "symbolic link (never followed)");
    }
    if (it->bad) l->bad++;
  }
  closedir(d);
  close(sub);
  return rc;
}

static int item_cmp(const void *a, const void *b) {
  const cache_item *x = a, *y = b;
  int c = strcmp(x->subdir, y->subdir);
  return c ? c : strcmp(x->name, y->name);
}

int cache_listing_read(cache_listing *l, const char *dir, int decode, char *err, size_t errlen) {
  memset(l, 0, sizeof l[0]);
  if (!dir || !*dir) {
    snprintf(err, errlen, "no cache directory");
    return -1;
  }
  if (strlen(dir) >= sizeof l->dir) {
    snprintf(err, errlen, "cache directory path too long");
    return -1;
  }
  copy_str(l->dir, sizeof l->dir, dir);
  int root = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0) {
    int e = errno;
    struct stat st;
    if (e == ENOENT) return 0; /* no cache yet: an empty listing */
    if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
      snprintf(err, errlen, "%s is a symbolic link; refusing to follow it", dir);
    else if (e == ENOTDIR)
      snprintf(err, errlen, "%s is not a directory", dir);
    else
      snprintf(err, errlen, "cannot open %s: %s", dir, strerror(e));
    return -1;
  }
  l->exists = 1;
  struct stat root_st;
  if (fstat(root, &root_st) != 0) {
    snprintf(err, errlen, "cannot stat %s: %s", dir, strerror(errno));
    close(root);
    return -1;
  }
  uid_t owner = root_st.st_uid;
  int dfd = dup(root);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d) {
    snprintf(err, errlen, "cannot read %s: %s", dir, strerror(errno));
    if (dfd >= 0) close(dfd);
    close(root);
    return -1;
  }
  int rc = 0;
  struct dirent *de;
  while (rc == 0 && (de = readdir(d)) != NULL) {
    const char *name = de->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    struct stat st;
    if (fstatat(root, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const char *why = NULL;
    ckjit_refusal refused =
        cache_name_is_subdir(name) ? ckjit__subdir_check(&st, owner, &why) : CKJIT_REFUSAL_NONE;
    if (cache_name_is_subdir(name) && !refused) {
      rc = scan_subdir(l, root, owner, name, decode, 0);
      continue;
    }
    /* A refused "xx" is listed as one bad item; a real directory is then
     * still scanned, so that its entries are listed and checked too. */
    cache_item_kind kind = refused ? CACHE_ITEM_SUBDIR : CACHE_ITEM_FOREIGN;
    cache_item *it = add_item(l, kind, "", name, &st);
    if (!it) {
      rc = -1;
      break;
    }
    if (kind == CACHE_ITEM_FOREIGN) l->foreign++;
    if (refused) set_refused(it, refused, why);
    else if (S_ISLNK(st.st_mode)) set_bad(it, "symbolic link (never followed)");
    if (it->bad) l->bad++;
    if (refused && S_ISDIR(st.st_mode)) rc = scan_subdir(l, root, owner, name, decode, 1);
  }
  closedir(d);
  close(root);
  if (rc != 0) {
    snprintf(err, errlen, "out of memory listing %s", dir);
    cache_listing_free(l);
    return -1;
  }
  if (l->count > 1) qsort(l->items, l->count, sizeof *l->items, item_cmp);
  return 0;
}

void cache_listing_free(cache_listing *l) {
  free(l->items);
  l->items = NULL;
  l->count = l->cap = 0;
}

void cache_format_size(uint64_t bytes, char *buf, size_t len) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) {
    snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    return;
  }
  double v = (double)bytes / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, len, "%.1f %s", v, units[u]);
}

void cache_format_age(int64_t s, char *buf, size_t len) {
  if (s < 0) s = 0;
  if (s < 120) snprintf(buf, len, "%llds", (long long)s);
  else if (s < 2 * 3600) snprintf(buf, len, "%lldm", (long long)(s / 60));
  else if (s < 2 * 86400) snprintf(buf, len, "%lldh", (long long)(s / 3600));
  else snprintf(buf, len, "%lldd", (long long)(s / 86400));
}

void cache_item_path(const cache_item *it, char *buf, size_t len) {
  if (it->subdir[0]) snprintf(buf, len, "%s/%s", it->subdir, it->name);
  else snprintf(buf, len, "%s", it->name);
  sanitize(buf);
}

void cache_listing_print_entries(FILE *out, const cache_listing *l, int64_t now) {
  int wo = 2, wk = 6, wa = 4;
  for (size_t i = 0; i < l->count; i++) {
    const cache_item *it = &l->items[i];
    if (it->kind != CACHE_ITEM_ENTRY || it->bad) continue;
    int o = (int)strlen(it->op), k = (int)strlen(it->kernel), a = (int)strlen(it->arch);
    if (o > wo) wo = o;
    if (k > wk) wk = k;
    if (a > wa) wa = a;
  }
  int any = 0;
  for (size_t i = 0; i < l->count && !any; i++) any = l->items[i].kind == CACHE_ITEM_ENTRY;
  if (!any) {
    fprintf(out, "(no entries)\n");
    return;
  }
  fprintf(out, "%-32s  %-*s  %-*s  %-*s  %10s  %5s  %8s\n", "KEY", wo, "OP", wk, "KERNEL", wa,
          "ARCH", "SIZE", "AGE", "LAST USE");
  for (size_t i = 0; i < l->count; i++) {
    const cache_item *it = &l->items[i];
    if (it->kind != CACHE_ITEM_ENTRY) continue;
    char size[32], age[32], used[40];
    cache_format_size(it->size, size, sizeof size);
    if (it->btime) cache_format_age(now - it->btime, age, sizeof age);
    else snprintf(age, sizeof age, "-");
    cache_format_age(now - it->mtime, used, sizeof used - 4);
    strcat(used, " ago");
    if (it->bad)
      fprintf(out, "%-32s  BAD: %s (%s, last used %s)\n", it->key, it->why, size, used);
    else
      fprintf(out, "%-32s  %-*s  %-*s  %-*s  %10s  %5s  %8s\n", it->key, wo,
              it->decoded ? it->op : "?", wk, it->decoded ? it->kernel : "?", wa,
              it->decoded ? it->arch : "?", size, age, used);
  }
}

void cache_listing_json_item_fields(json_writer *w, const cache_item *it, int64_t now) {
  static const char *const kinds[] = {"entry", "temp", "subdir", "foreign"};
  char path[300];
  cache_item_path(it, path, sizeof path);
  json_string(w, "kind", kinds[it->kind]);
  json_string(w, "path", path);
  json_string(w, "type", it->type == 'f' ? "file" : it->type == 'l' ? "symlink"
                         : it->type == 'd' ? "directory" : "other");
  if (it->kind == CACHE_ITEM_ENTRY) json_string(w, "key", it->key);
  if (it->decoded) {
    json_string(w, "kernel", it->kernel);
    json_string(w, "spec", it->spec);
    json_string(w, "op", it->op);
    json_string(w, "arch", it->arch);
    json_uint(w, "payload_size", it->payload_size);
  }
  json_uint(w, "size", it->size);
  json_int(w, "mtime", it->mtime);
  /* An entry's mtime is its last use (cache/disk_cache.h); its age is since
   * its file was created, where the file system records it. */
  if (it->kind == CACHE_ITEM_ENTRY) {
    json_int(w, "last_use", it->mtime);
    json_int(w, "last_use_s", now - it->mtime > 0 ? now - it->mtime : 0);
    if (it->btime) json_int(w, "created", it->btime);
    else json_null(w, "created");
  }
  int64_t born = it->btime ? it->btime : it->mtime;
  json_int(w, "age_s", now - born > 0 ? now - born : 0);
  json_bool(w, "ok", !it->bad);
  if (it->bad) json_string(w, "why", it->why);
}

void cache_listing_json_entries(json_writer *w, const char *key, const cache_listing *l,
                                int64_t now) {
  json_begin_array(w, key);
  for (size_t i = 0; i < l->count; i++)
    if (l->items[i].kind == CACHE_ITEM_ENTRY) {
      json_begin_object(w, NULL);
      cache_listing_json_item_fields(w, &l->items[i], now);
      json_end_object(w);
    }
  json_end_array(w);
}
