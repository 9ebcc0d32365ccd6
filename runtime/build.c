/* spec -> specialized source -> key -> disk cache, memory, remote cache or
 * compiler -> code object. */
#include "../base/buffer.h"
#include "build.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cache/atomic_file.h"
#include "../cache/entry.h"
#include "../cache/entry_accept.h"
#include "../cache/remote.h"
#include "arch.h"
#include "backend.h"
#include "code_cache.h"
#include "embedded.h"
#include "../base/error.h"
#include "../base/log.h"
#include "../base/clock.h"
#include "../base/stats.h"

#define MAX_OPTIONS 8

void (*ckjit__build_test_hook)(const char *stage, const char *kernel) = NULL;

/* Dumps are debugging output: written whole through the one file writer
 * (a reader, or another process dumping the same kernel, never sees half a
 * file), not synced to disk; a failure costs a warning and nothing else. */
static void dump_file(const char *dir, const char *name, const char *ext, const char *text) {
  char path[CKJIT_PATH_MAX + 256];
  snprintf(path, sizeof path, "%s/%s%s", dir, name, ext);
  ckjit_file_error e;
  const int quiet = ckjit__error_quiet(1);
  if (ckjit__file_write(path, text, strlen(text), 0666, 0, &e) != CKJIT_SUCCESS)
    CKJIT_WARN("CKJIT_DUMP_DIR: cannot write %s: %s", path, strerror(e.err));
  ckjit__error_quiet(quiet);
}

/* Writes the specialized source, its options and the compile log. */
static void dump(const ckjit_runtime *rt, const char *kernel, const char *hex, const char *source,
                 char opts[][96], int n_opts, const char *log) {
  if (!rt->dump_dir[0]) return;
  if (ckjit__file_make_dir(rt->dump_dir, 0700, 0)) {
    CKJIT_WARN("CKJIT_DUMP_DIR: cannot create %s: %s", rt->dump_dir, strerror(errno));
    return;
  }
  char name[160], options[MAX_OPTIONS * 100] = "";
  snprintf(name, sizeof name, "%s-%s", kernel, hex);
  for (int i = 0; i < n_opts; i++) {
    strcat(options, opts[i]);
    strcat(options, "\n");
  }
  dump_file(rt->dump_dir, name, ".cu", source);
  dump_file(rt->dump_dir, name, ".options", options);
  dump_file(rt->dump_dir, name, ".log", log ? log : "");
}

/* Appends the source lines a compiler log points at ("file.cu(12)" from
 * NVRTC, "file.cu:12:5" from hipRTC), with one line of context each side. */
static void append_offending_lines(const char *log, const char *source_name, const char *source) {
  int lines[5], n = 0;
  size_t name_len = strlen(source_name);
  for (const char *p = strstr(log, source_name); p && n < 5; p = strstr(p + 1, source_name)) {
    const char *q = p + name_len;
    if (*q != '(' && *q != ':') continue;
    int line = atoi(q + 1);
    int seen = 0;
    for (int i = 0; i < n; i++) seen |= lines[i] == line;
    if (line > 0 && !seen) lines[n++] = line;
  }
  if (!n) return;
  ckjit__error_append("\noffending lines of the specialized source:");
  for (int i = 0; i < n; i++) {
    int line = 1;
    const char *s = source;
    while (*s) {
      const char *end = strchr(s, '\n');
      size_t len = end ? (size_t)(end - s) : strlen(s);
      if (line >= lines[i] - 1 && line <= lines[i] + 1)
        ckjit__error_append("\n%s%5d | %.*s", line == lines[i] ? ">" : " ", line, (int)len, s);
      if (!end) break;
      s = end + 1;
      line++;
    }
  }
}

/* The header of a code object's cache entry (disk and remote alike). */
static void entry_meta(const ckjit_spec *spec, const char *arch, const char *kernel,
                       const ckjit_key *key, ckjit_entry_meta *meta) {
  memset(meta, 0, sizeof *meta);
  meta->key = *key;
  ckjit__copy_str(meta->arch, sizeof meta->arch, arch);
  ckjit__copy_str(meta->kernel, sizeof meta->kernel, kernel);
  ckjit__spec_format(spec, meta->spec, sizeof meta->spec);
}

/* Writes the entry of a code object this process holds into the writable
 * disk cache; sets out->stored, or out->store_error when the disk cache is
 * on but the entry could not be written.  When another process stored the
 * key first, its code object replaces out->code (one key, one code object,
 * even from a compiler that is not deterministic). */
static void store_entry(ckjit_runtime *rt, const ckjit_spec *spec, const char *arch,
                        const char *kernel, ckjit_build_result *out) {
  if (!rt->disk_requested) return; /* off by request: nothing is missing */
  if (!rt->disk.usable) {
    if (rt->disk.dir[0])
      snprintf(out->store_error, sizeof out->store_error,
               "the cache directory %s is unusable (refused or not creatable; see the warning "
               "logged when ckjit initialized)",
               rt->disk.dir);
    else
      snprintf(out->store_error, sizeof out->store_error,
               "there is no cache directory (see the warning logged when ckjit initialized)");
    return;
  }
  ckjit_entry_meta meta;
  entry_meta(spec, arch, kernel, &out->key, &meta);
  /* Not this call's failure (an op goes on from memory): kept out of
   * ckjit_last_error(); ckjit_compile_spec reports it from out. */
  int quiet = ckjit__error_quiet(1);
  void *kept;
  size_t kept_size;
  ckjit_status st =
      ckjit__disk_store_first(&rt->disk, &meta, out->code.data, out->code.size,
                              !out->from_remote, &kept, &kept_size);
  if (st == CKJIT_SUCCESS) {
    out->stored = 1;
    if (kept) {
      ckjit__buf_free(&out->code);
      out->code.data = kept;
      out->code.size = out->code.cap = kept_size;
    }
  } else if (!rt->disk.writable) {
    snprintf(out->store_error, sizeof out->store_error,
             "the cache directory %s is read-only (see the warning logged when ckjit "
             "initialized)",
             rt->disk.dir);
  } else {
    /* Each store tries again (cache/disk_cache.c latches nothing), so the
     * reason is this store's own. */
    const char *why = ckjit__error_latest();
    if (!strncmp(why, "cache: ", 7)) why += 7; /* the caller says "not stored in the disk cache" */
    snprintf(out->store_error, sizeof out->store_error, "%s", why);
  }
  ckjit__error_quiet(quiet);
}

/* ---- The remote tier (cache/remote.h): after memory, the disk and its
 * layers, before the compiler.  Reached from the build path only, so never
 * on an op's hot path. */

static int remote_enabled(const ckjit_runtime *rt) {
  return rt->disk_requested && rt->disk.remote.enabled;
}

/* A fetched value must pass what a disk entry passes (cache/entry_accept.h:
 * header, checksums, the key asked for, which covers the compiler
 * fingerprint, and a code object for the arch that defines the kernel),
 * and name the arch and kernel asked for, as build's disk lookup checks. */
typedef struct remote_check {
  const ckjit_key *key;
  const char *arch, *kernel;
  size_t payload_offset, payload_size;
} remote_check;

static int remote_accept(void *ctx, const uint8_t *value, size_t size, const char **why) {
  remote_check *rc = ctx;
  ckjit_entry_meta meta;
  const uint8_t *payload;
  size_t payload_size;
  int quiet = ckjit__error_quiet(1);
  int bad = ckjit__entry_accept_bytes(value, size, rc->key, &meta, &payload, &payload_size, why);
  ckjit__error_quiet(quiet);
  if (bad) return -1;
  if (strcmp(meta.arch, rc->arch) || strcmp(meta.kernel, rc->kernel)) {
    *why = "its arch or kernel is not the one asked for";
    return -1;
  }
  rc->payload_offset = (size_t)(payload - value);
  rc->payload_size = payload_size;
  return 0;
}

/* Looks the key up in the remote cache: 1 with the code object in
 * out->code (then written to the disk cache and kept in memory like a
 * compiled one), 0 on a miss (*ticket may hold the lease). */
static int remote_lookup(ckjit_runtime *rt, const ckjit_spec *spec, const char *arch,
                         const char *kernel, ckjit_build_result *out, ckjit_remote_ticket *ticket) {
  remote_check check = {&out->key, arch, kernel, 0, 0};
  uint8_t *value;
  size_t size;
  if (!ckjit__remote_fetch(&rt->disk.remote, &out->key, remote_accept, &check, &value, &size,
                           ticket))
    return 0;
  memmove(value, value + check.payload_offset, check.payload_size);
  out->code.data = (char *)value;
  out->code.size = out->code.cap = check.payload_size;
  out->from_remote = 1;
  store_entry(rt, spec, arch, kernel, out);
  ckjit__code_cache_put(&out->key, out->code.data, out->code.size, rt->disk.max_bytes,
                        rt->disk.max_entries);
  return 1;
}

/* Sends a freshly compiled code object's entry (the very bytes a disk
 * entry holds) to the remote cache and releases the lease. */
static void remote_store(ckjit_runtime *rt, const ckjit_spec *spec, const char *arch,
                         const char *kernel, const ckjit_build_result *out,
                         ckjit_remote_ticket *ticket) {
  ckjit_entry_meta meta;
  entry_meta(spec, arch, kernel, &out->key, &meta);
  uint8_t *entry;
  size_t size;
  if (ckjit__entry_encode(&meta, out->code.data, out->code.size, &entry, &size)) {
    ckjit__remote_release(&rt->disk.remote, &out->key, ticket);
    return;
  }
  ckjit__remote_store(&rt->disk.remote, &out->key, entry, size, ticket);
  free(entry);
}

ckjit_status ckjit__build(ckjit_runtime *rt, const ckjit_spec *spec, const char *arch,
                          ckjit_build_result *out) {
  double t_start = ckjit__now_ms();
  memset(out, 0, sizeof *out);
  const ckjit_family *fam = ckjit__family_get(spec->family);
  if (!fam) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "unknown kernel family %u", spec->family);
  ckjit_status st = ckjit__spec_check(spec);
  if (st) return st;
  /* One spelling per target ("gfx90a:xnack+:sramecc+" is
   * "gfx90a:sramecc+:xnack+"): the key, the entry's metadata and the
   * compiler all see the canonical one. */
  char canonical_arch[CKJIT_ARCH_MAX];
  arch = ckjit__arch_canonical(arch, canonical_arch);

  ckjit_backend vendor = ckjit__arch_vendor(arch);
  if (vendor == CKJIT_BACKEND_AUTO) return ckjit__arch_validate(arch, 0, 0);
  if ((st = ckjit__spec_targets(spec, arch))) return st; /* never an empty kernel */
  const ckjit_compiler *c;
  if ((st = ckjit__compiler_get(vendor, &c))) return st;
  CKJIT_DEBUG("build: compiler identified after %.3f ms", ckjit__now_ms() - t_start);
  if ((st = ckjit__arch_validate(arch, c->major, c->minor))) return st;

  ckjit_buffer source = {0}, log = {0};
  if ((st = ckjit__spec_render(spec, &source))) return st;

  char opts[MAX_OPTIONS][96];
  const char *opt_ptrs[MAX_OPTIONS];
  int n_opts = c->options(c, arch, opts, MAX_OPTIONS);
  for (int i = 0; i < n_opts; i++) opt_ptrs[i] = opts[i];
  const char *const *hdr_names, *const *hdr_sources;
  int n_hdrs = ckjit__embedded_headers(&hdr_names, &hdr_sources);

  ckjit_key_input key_in = {
      .format_version = CKJIT_CACHE_FORMAT_VERSION,
      .library_version = CKJIT_VERSION_STRING,
      .backend = vendor == CKJIT_BACKEND_CUDA ? "cuda" : "hip",
      .compiler = c->fingerprint,
      .arch = arch,
      .n_options = n_opts,
      .options = opt_ptrs,
      .source = source.data,
      .source_len = source.size,
      .n_headers = n_hdrs,
      .header_names = hdr_names,
      .header_sources = hdr_sources,
  };
  if (ckjit__key_compute(&key_in, &out->key)) {
    ckjit__buf_free(&source);
    return ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "out of memory hashing the cache key");
  }
  char hex[33];
  ckjit__key_hex(&out->key, hex);

  CKJIT_DEBUG("build %s: source and key ready after %.3f ms", hex, ckjit__now_ms() - t_start);
  /* The disk first: it is where the entry must be, and a hit there is
   * what ckjit_compile_spec's callers (prewarm) rely on. */
  if (rt->disk_enabled) {
    void *payload;
    size_t size;
    ckjit_entry_meta meta;
    if (ckjit__disk_load(&rt->disk, &out->key, &payload, &size, &meta)) {
      if (!strcmp(meta.arch, arch) && !strcmp(meta.kernel, fam->kernel)) {
        out->code.data = payload;
        out->code.size = out->code.cap = size;
        out->from_disk = 1;
        out->stored = 1;
        ckjit__buf_free(&source);
        CKJIT_DEBUG("disk hit %s (%s, %s) after %.3f ms", hex, fam->kernel, arch,
                    ckjit__now_ms() - t_start);
        return CKJIT_SUCCESS;
      }
      free(payload); /* same key, other metadata: impossible unless tampered */
      CKJIT_WARN("cache entry %s has mismatched metadata; recompiling", hex);
    }
  }

  /* Then what this process compiled before: the disk lost it or never took
   * it (full, read-only, a bad name, removed since); write it again. */
  ckjit_code_claim claim = ckjit__code_cache_claim(&out->key, &out->code);
  if (claim == CKJIT_CODE_NO_MEMORY) {
    ckjit__buf_free(&source);
    return ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "out of memory in the code object cache");
  }
  if (claim == CKJIT_CODE_HIT) {
    out->from_memory = 1;
    ckjit__buf_free(&source);
    CKJIT_DEBUG("memory hit %s (%s, %s) after %.3f ms", hex, fam->kernel, arch,
                ckjit__now_ms() - t_start);
    store_entry(rt, spec, arch, fam->kernel, out);
    return CKJIT_SUCCESS;
  }

  /* Then the remote cache: another process of the fleet may have it, or be
   * compiling it (then this waits for its entry, within a bound). */
  const int remote = remote_enabled(rt);
  ckjit_remote_ticket ticket;
  memset(&ticket, 0, sizeof ticket);
  if (remote && remote_lookup(rt, spec, arch, fam->kernel, out, &ticket)) {
    ckjit__buf_free(&source);
    CKJIT_DEBUG("remote hit %s (%s, %s) after %.3f ms", hex, fam->kernel, arch,
                ckjit__now_ms() - t_start);
    return CKJIT_SUCCESS;
  }

  char source_name[96];
  ckjit__copy_str(source_name, sizeof source_name, fam->source);
  ckjit_compile_input in = {
      .arch = arch,
      .source = source.data,
      .source_name = source_name,
      .n_headers = n_hdrs,
      .header_sources = hdr_sources,
      .header_names = hdr_names,
      .n_options = n_opts,
      .options = opt_ptrs,
  };
  double t0 = ckjit__now_ms();
  void (*hook)(const char *, const char *) =
      __atomic_load_n(&ckjit__build_test_hook, __ATOMIC_ACQUIRE);
  if (hook) hook("compile", fam->kernel);
  st = c->compile(c, &in, &out->code, &log);
  out->compile_ms = ckjit__now_ms() - t0;
  dump(rt, fam->kernel, hex, source.data, opts, n_opts, log.data);
  if (st) {
    ckjit__stat_add(CKJIT_STAT_COMPILE_FAILURES, 1);
    char spec_text[CKJIT_SPEC_TEXT_MAX];
    ckjit__spec_format(spec, spec_text, sizeof spec_text);
    ckjit__error_append("\nwhile compiling %s for %s with %s (key %s)", spec_text, arch,
                        c->fingerprint, hex);
    if (log.size) ckjit__error_append("\ncompiler log:\n%s", log.data);
    if (log.size) append_offending_lines(log.data, source_name, source.data);
    ckjit__buf_free(&out->code);
    if (remote) ckjit__remote_release(&rt->disk.remote, &out->key, &ticket);
    ckjit__code_cache_abandon(&out->key);
  } else {
    ckjit__stat_add(CKJIT_STAT_COMPILES, 1);
    ckjit__stat_add_compile_ms(out->compile_ms);
    CKJIT_INFO("compiled %s for %s in %.1f ms (key %s)", fam->kernel, arch, out->compile_ms, hex);
    store_entry(rt, spec, arch, fam->kernel, out); /* first: it may take the disk's code object */
    if (remote) remote_store(rt, spec, arch, fam->kernel, out, &ticket);
    ckjit__code_cache_put(&out->key, out->code.data, out->code.size, rt->disk.max_bytes,
                          rt->disk.max_entries);
  }
  ckjit__buf_free(&source);
  ckjit__buf_free(&log);
  return st;
}
