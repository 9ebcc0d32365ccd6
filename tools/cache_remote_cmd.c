/* ckjit-cache push / pull / info --remote: a local cache directory and the
 * remote cache tier (cache/remote.h), one connection (cache/remote_redis.h).
 * Entries are checked with the library's own rule both ways
 * (cache/entry_accept.h): what is pushed was read and verified from disk,
 * what is pulled is verified before it is stored. */
#include "cache_remote_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/disk_cache.h"
#include "cache/entry_accept.h"
#include "cache/remote.h"
#include "cache/remote_redis.h"
#include "cache/scan.h"
#include "cache_listing.h"
#include "ckjit/ckjit.h"
#include "json_writer.h"

#define WHY_MAX 400
#define STRLEN_BATCH 256

typedef struct remote_session {
  ckjit_remote_config cfg;
  ckjit_redis *c;
} remote_session;

/* 0 connected; else the command's exit status (2: a bad URL). */
static int session_open(remote_session *s, const char *url) {
  memset(s, 0, sizeof *s);
  ckjit_status st = ckjit__remote_config_url(&s->cfg, url, "--remote");
  if (st != CKJIT_SUCCESS) {
    fprintf(stderr, "ckjit-cache: %s\n", ckjit_last_error());
    return st == CKJIT_ERROR_INVALID_ARGUMENT ? 2 : 1;
  }
  if (!s->cfg.enabled) {
    fprintf(stderr, "ckjit-cache: --remote needs a URL (redis://host[:port][/db] or "
                    "unix:///path/to.sock)\n");
    return 2;
  }
  char why[WHY_MAX];
  if (ckjit__redis_connect(&s->cfg.url, s->cfg.connect_timeout_ms, s->cfg.timeout_ms, &s->c, why,
                           sizeof why) != CKJIT_REDIS_OK) {
    fprintf(stderr, "ckjit-cache: cannot use the remote cache %s: %s\n", s->cfg.url.display, why);
    return 1;
  }
  return 0;
}

static void session_close(remote_session *s) { ckjit__redis_close(s->c); }

/* ---- the remote names ------------------------------------------------------- */
typedef struct name_list {
  char **names;
  size_t n, cap;
  int oom;
} name_list;

static void collect(void *ctx, const char *name, size_t n) {
  name_list *l = ctx;
  if (l->oom) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 256;
    char **names = realloc(l->names, cap * sizeof *names);
    if (!names) {
      l->oom = 1;
      return;
    }
    l->names = names;
    l->cap = cap;
  }
  if (!(l->names[l->n] = strndup(name, n))) l->oom = 1;
  else l->n++;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(name_list *l) {
  for (size_t i = 0; i < l->n; i++) free(l->names[i]);
  free(l->names);
  memset(l, 0, sizeof *l);
}

/* Every name under CKJIT_REMOTE_PREFIX (SCAN, never KEYS: the server is
 * not blocked), sorted, each once.  0, or -1 with a message printed. */
static int scan_all(remote_session *s, name_list *l) {
  memset(l, 0, sizeof *l);
  uint64_t cursor = 0;
  char why[WHY_MAX];
  do {
    if (ckjit__redis_scan(s->c, &cursor, CKJIT_REMOTE_PREFIX "*", collect, l, why, sizeof why) !=
        CKJIT_REDIS_OK) {
      fprintf(stderr, "ckjit-cache: SCAN on %s failed: %s\n", s->cfg.url.display, why);
      names_free(l);
      return -1;
    }
  } while (cursor != 0 && !l->oom);
  if (l->oom) {
    fprintf(stderr, "ckjit-cache: out of memory listing the remote cache\n");
    names_free(l);
    return -1;
  }
  if (l->n) qsort(l->names, l->n, sizeof *l->names, by_name);
  size_t out = 0;
  for (size_t i = 0; i < l->n; i++) {
    if (out && !strcmp(l->names[out - 1], l->names[i])) free(l->names[i]);
    else l->names[out++] = l->names[i];
  }
  l->n = out;
  return 0;
}

/* ---- reports -------------------------------------------------------------- */
typedef struct report {
  int json;
  json_writer w;
  const char *verb; /* "pushed" / "pulled" */
} report;

static void report_begin(report *r, const char *dir, const remote_session *s) {
  if (!r->json) return;
  json_init(&r->w, stdout);
  json_begin_object(&r->w, NULL);
  json_string(&r->w, "cache_dir", dir);
  json_string(&r->w, "remote", s->cfg.url.display);
  json_begin_array(&r->w, "problems");
}

static void report_problem(report *r, const char *key_hex, const char *what, const char *why) {
  if (r->json) {
    json_begin_object(&r->w, NULL);
    json_string(&r->w, "key", key_hex);
    json_string(&r->w, "problem", what);
    json_string(&r->w, "why", why);
    json_end_object(&r->w);
  } else {
    fprintf(stderr, "%-5s %s: %s (not %s)\n", what, key_hex, why, r->verb);
  }
}

typedef struct counts {
  uint64_t done, bytes, already, bad, too_large, failed;
} counts;

static void report_end(report *r, const counts *n, const char *dir, const remote_session *s,
                       int push) {
  if (r->json) {
    json_end_array(&r->w);
    json_uint(&r->w, r->verb, n->done);
    json_uint(&r->w, "bytes", n->bytes);
    if (!push) json_uint(&r->w, "already_local", n->already);
    json_uint(&r->w, "bad", n->bad);
    if (push) json_uint(&r->w, "too_large", n->too_large);
    json_uint(&r->w, "failed", n->failed);
    json_end_object(&r->w);
    json_finish(&r->w);
    return;
  }
  char size[32];
  cache_format_size(n->bytes, size, sizeof size);
  printf("%s %llu entr%s (%s) from %s to %s", r->verb, (unsigned long long)n->done,
         n->done == 1 ? "y" : "ies", size, push ? dir : s->cfg.url.display,
         push ? s->cfg.url.display : dir);
  if (!push && n->already) printf("; %llu already there", (unsigned long long)n->already);
  if (n->bad) printf("; %llu bad (left out)", (unsigned long long)n->bad);
  if (n->too_large)
    printf("; %llu over CKJIT_REMOTE_CACHE_MAX_ENTRY (not sent)", (unsigned long long)n->too_large);
  if (n->failed) printf("; %llu failed", (unsigned long long)n->failed);
  printf("\n");
}

/* ---- push ----------------------------------------------------------------- */
int cache_cmd_push(const char *url, int json, const char *dir) {
  remote_session s;
  int rc = session_open(&s, url);
  if (rc) return rc;
  ckjit_scan scan;
  if (ckjit__cache_scan(dir, 0, &scan) != 0) {
    fprintf(stderr, "ckjit-cache: cannot list %s\n", dir);
    session_close(&s);
    return 1;
  }
  report r = {json, {0}, "pushed"};
  report_begin(&r, dir, &s);
  counts n = {0};
  for (size_t i = 0; i < scan.count; i++) {
    const ckjit_key *key = &scan.entries[i].key;
    char hex[33], name[CKJIT_REMOTE_NAME_MAX], why[WHY_MAX];
    ckjit__key_hex(key, hex);
    uint8_t *file;
    size_t size;
    const char *refusal = "";
    int got = ckjit__disk_read_entry(dir, key, 0, &file, &size, NULL, NULL, &refusal);
    if (got == 0) continue; /* removed since the scan */
    if (got < 0) {
      n.bad++;
      report_problem(&r, hex, "BAD", refusal);
      continue;
    }
    if (size > s.cfg.max_entry) {
      n.too_large++;
      snprintf(why, sizeof why, "%zu bytes, over CKJIT_REMOTE_CACHE_MAX_ENTRY (%llu)", size,
               (unsigned long long)s.cfg.max_entry);
      report_problem(&r, hex, "SKIP", why);
      free(file);
      continue;
    }
    ckjit__remote_entry_name(key, name);
    ckjit_redis_rc sr = ckjit__redis_set(s.c, name, file, size, s.cfg.ttl_s * 1000, 0, why,
                                         sizeof why);
    free(file);
    if (sr == CKJIT_REDIS_OK) {
      n.done++;
      n.bytes += size;
      continue;
    }
    n.failed++;
    report_problem(&r, hex, "ERROR", why);
    if (sr == CKJIT_REDIS_IO) break; /* the connection is gone */
  }
  ckjit__cache_scan_free(&scan);
  report_end(&r, &n, dir, &s, 1);
  session_close(&s);
  return n.bad || n.failed ? 1 : 0;
}

/* ---- pull ----------------------------------------------------------------- */
int cache_cmd_pull(const char *url, int json, const char *dir) {
  remote_session s;
  int rc = session_open(&s, url);
  if (rc) return rc;
  ckjit_disk_cache *disk = malloc(sizeof *disk);
  if (!disk) {
    fprintf(stderr, "ckjit-cache: out of memory\n");
    session_close(&s);
    return 1;
  }
  ckjit__disk_open(disk, dir);
  if (!disk->usable || !disk->writable) {
    fprintf(stderr, "ckjit-cache: %s is not a usable, writable cache directory (see the warning "
                    "above)\n",
            dir);
    free(disk);
    session_close(&s);
    return 1;
  }
  disk->max_bytes = disk->max_entries = 0; /* as import: nothing evicted meanwhile */
  name_list names;
  if (scan_all(&s, &names) != 0) {
    free(disk);
    session_close(&s);
    return 1;
  }
  report r = {json, {0}, "pulled"};
  report_begin(&r, dir, &s);
  counts n = {0};
  for (size_t i = 0; i < names.n; i++) {
    ckjit_key key;
    if (!ckjit__remote_name_key(names.names[i], strlen(names.names[i]), &key)) continue; /* a lease */
    char hex[33], why[WHY_MAX];
    ckjit__key_hex(&key, hex);
    uint8_t *value;
    size_t size;
    ckjit_redis_rc gr = ckjit__redis_get(s.c, names.names[i], &value, &size, why, sizeof why);
    if (gr == CKJIT_REDIS_NIL) continue; /* expired or evicted since the scan */
    if (gr != CKJIT_REDIS_OK) {
      n.failed++;
      report_problem(&r, hex, "ERROR", why);
      if (gr == CKJIT_REDIS_IO) break;
      continue;
    }
    ckjit_entry_meta meta;
    const uint8_t *payload;
    size_t payload_size;
    const char *refusal = "";
    if (size > CKJIT_ENTRY_MAX_FILE) {
      n.bad++;
      report_problem(&r, hex, "BAD", "larger than any entry");
    } else if (ckjit__entry_accept_bytes(value, size, &key, &meta, &payload, &payload_size,
                                         &refusal) != 0) {
      n.bad++;
      report_problem(&r, hex, "BAD", refusal);
    } else {
      void *kept = NULL;
      size_t kept_size = 0;
      if (ckjit__disk_store_first(disk, &meta, payload, payload_size, 1, &kept, &kept_size) !=
          CKJIT_SUCCESS) {
        n.failed++;
        report_problem(&r, hex, "ERROR", ckjit_last_error());
      } else if (kept) {
        n.already++;
        free(kept);
      } else {
        n.done++;
        n.bytes += size;
      }
    }
    free(value);
  }
  names_free(&names);
  report_end(&r, &n, dir, &s, 0);
  free(disk);
  session_close(&s);
  return n.bad || n.failed ? 1 : 0;
}

/* ---- info ----------------------------------------------------------------- */
/* The value of "name:" in INFO's text, or "" (into out). */
static void info_field(const char *text, const char *name, char *out, size_t len) {
  out[0] = '\0';
  size_t n = strlen(name);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (!strncmp(p, name, n) && p[n] == ':') {
      size_t v = strcspn(p + n + 1, "\r\n");
      snprintf(out, len, "%.*s", (int)v, p + n + 1);
      return;
    }
  }
}

int cache_cmd_remote_info(const char *url, int json) {
  remote_session s;
  int rc = session_open(&s, url);
  if (rc) return rc;
  name_list names;
  if (scan_all(&s, &names) != 0) {
    session_close(&s);
    return 1;
  }
  uint64_t entries = 0, leases = 0, bytes = 0;
  const char *batch[STRLEN_BATCH];
  uint64_t sizes[STRLEN_BATCH];
  size_t nb = 0;
  char why[WHY_MAX];
  rc = 0;
  for (size_t i = 0; i <= names.n && !rc; i++) {
    ckjit_key key;
    if (i < names.n) {
      const char *name = names.names[i];
      if (ckjit__remote_name_key(name, strlen(name), &key)) {
        entries++;
        batch[nb++] = name;
      } else if (!strncmp(name, CKJIT_REMOTE_LEASE_PREFIX, sizeof CKJIT_REMOTE_LEASE_PREFIX - 1)) {
        leases++;
      }
    }
    if (nb == STRLEN_BATCH || (i == names.n && nb)) {
      if (ckjit__redis_strlens(s.c, batch, nb, sizes, why, sizeof why) != CKJIT_REDIS_OK) {
        fprintf(stderr, "ckjit-cache: STRLEN on %s failed: %s\n", s.cfg.url.display, why);
        rc = 1;
      }
      for (size_t k = 0; k < nb && !rc; k++) bytes += sizes[k];
      nb = 0;
    }
  }
  names_free(&names);
  char used[64] = "", maxmemory[64] = "", policy[64] = "";
  char *info = NULL;
  if (!rc && ckjit__redis_info(s.c, "memory", &info, why, sizeof why) == CKJIT_REDIS_OK) {
    info_field(info, "used_memory", used, sizeof used);
    info_field(info, "maxmemory", maxmemory, sizeof maxmemory);
    info_field(info, "maxmemory_policy", policy, sizeof policy);
  }
  free(info);
  if (rc) {
    session_close(&s);
    return rc;
  }
  if (json) {
    json_writer w;
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    json_string(&w, "remote", s.cfg.url.display);
    json_uint(&w, "entries", entries);
    json_uint(&w, "bytes", bytes);
    json_uint(&w, "leases", leases);
    if (used[0]) json_uint(&w, "used_memory", strtoull(used, NULL, 10));
    else json_null(&w, "used_memory");
    if (maxmemory[0]) json_uint(&w, "maxmemory", strtoull(maxmemory, NULL, 10));
    else json_null(&w, "maxmemory");
    json_string(&w, "maxmemory_policy", policy[0] ? policy : NULL);
    json_uint(&w, "ttl_s", (uint64_t)s.cfg.ttl_s);
    json_end_object(&w);
    json_finish(&w);
  } else {
    char size[32];
    cache_format_size(bytes, size, sizeof size);
    printf("remote:       %s\n", s.cfg.url.display);
    printf("entries:      %llu\n", (unsigned long long)entries);
    printf("total bytes:  %llu (%s)\n", (unsigned long long)bytes, size);
    printf("leases:       %llu (compiles in progress)\n", (unsigned long long)leases);
    if (used[0]) {
      char u[32], m[32];
      cache_format_size(strtoull(used, NULL, 10), u, sizeof u);
      cache_format_size(strtoull(maxmemory, NULL, 10), m, sizeof m);
      printf("server:       %s used, maxmemory %s, policy %s\n", u,
             strtoull(maxmemory, NULL, 10) ? m : "none", policy[0] ? policy : "?");
      if (!strtoull(maxmemory, NULL, 10) || strcmp(policy, "allkeys-lru"))
        printf("              (bound it: maxmemory N and maxmemory-policy allkeys-lru; see README)\n");
    } else {
      printf("server:       memory unknown (INFO memory refused: %s)\n", why);
    }
  }
  session_close(&s);
  return 0;
}
