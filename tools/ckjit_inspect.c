/* ckjit-inspect: the resource use and occupancy of the kernels of a
 * specialization, read from the compiled code object.
 *
 *   ckjit-inspect [--arch LIST] [--cache-dir DIR] [--block N] [--json] SPEC...
 *
 * Each (spec, arch) is compiled with ckjit_compile_spec into the disk cache
 * (or found there); the entry file is read back and verified with
 * cache/entry.h, and the code object in it is decoded (inspect_codeobj.h):
 * registers, shared memory / LDS, stack / scratch, spills; then the
 * occupancy that follows (inspect_occupancy.h).  No GPU is needed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/disk_cache.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "cache/payload_check.h"
#include "ckjit/ckjit.h"
#include "file_read.h"
#include "inspect_codeobj.h"
#include "inspect_occupancy.h"
#include "json_writer.h"
#include "runtime/spec.h"
#include "str_list.h"

static void usage(FILE *out) {
  fputs(
      "usage: ckjit-inspect [options] SPEC|FILE...\n"
      "\n"
      "Compiles each SPEC for each arch into the ckjit disk cache (or finds it there),\n"
      "reads the code object back from the cache entry and reports, per kernel, its\n"
      "resource use and the occupancy that follows.  No GPU is needed.  A FILE (a\n"
      "cache entry <key>.ckjit, or a bare cubin or AMDGPU code object) is inspected\n"
      "as it is, for the arch it was built for.\n"
      "  NVIDIA (cubin): registers per thread, static shared memory (plus the per-block\n"
      "    reserve), stack frame (local memory) and spills, constant bank, launch bound\n"
      "  AMD (code object metadata): VGPRs, AGPRs, SGPRs, spills, LDS, scratch per lane,\n"
      "    wavefront size, max flat work-group size\n"
      "  occupancy: resident blocks and warps per SM (work-groups and waves per CU)\n"
      "    for the block size, and the resource that limits it\n"
      "\n"
      "options:\n"
      "  --arch LIST       comma-separated archs, both vendors allowed, e.g. sm_90,gfx90a\n"
      "                    (default: CKJIT_ARCH or the GPU's)\n"
      "  --cache-dir DIR   cache directory (default: CKJIT_CACHE_DIR,\n"
      "                    XDG_CACHE_HOME/ckjit, ~/.cache/ckjit)\n"
      "  --block N         threads per block for the occupancy (default: the spec's\n"
      "                    threads, else the kernel's launch bound, else 256)\n"
      "  --json            machine-readable output on stdout\n"
      "  -h, --help        this help\n"
      "\n"
      "Occupancy limits are known for sm_70, sm_75, sm_80, sm_86, sm_89, sm_90(a),\n"
      "sm_100, gfx900, gfx906, gfx908, gfx90a and gfx940-gfx942; see\n"
      "tools/inspect_occupancy.h for the model and its assumptions.\n"
      "\n"
      "Exit status: 0 when every item was inspected, 1 when any failed, 2 on a\n"
      "usage error.\n",
      out);
}

typedef struct options {
  str_list specs, archs;
  const char *cache_dir;
  int json;
  int block;
} options;

static int parse_args(int argc, char **argv, options *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(a, "--json")) {
      o->json = 1;
    } else if (!strcmp(a, "--arch") || !strncmp(a, "--arch=", 7)) {
      v = a[6] == '=' ? a + 7 : i + 1 < argc ? argv[++i] : NULL;
      int n = v ? str_list_add_csv(&o->archs, v) : 0;
      if (n < 0) return -1;
      if (n == 0) {
        fprintf(stderr, "ckjit-inspect: --arch needs a list, e.g. --arch sm_90,gfx90a\n");
        return -1;
      }
    } else if (!strcmp(a, "--cache-dir") || !strncmp(a, "--cache-dir=", 12)) {
      v = a[11] == '=' ? a + 12 : i + 1 < argc ? argv[++i] : NULL;
      if (!v || !*v) {
        fprintf(stderr, "ckjit-inspect: --cache-dir needs a directory\n");
        return -1;
      }
      o->cache_dir = v;
    } else if (!strcmp(a, "--block") || !strncmp(a, "--block=", 8)) {
      v = a[7] == '=' ? a + 8 : i + 1 < argc ? argv[++i] : NULL;
      char *end;
      long n = v ? strtol(v, &end, 10) : 0;
      if (!v || !*v || *end || n < 1 || n > 1024) {
        fprintf(stderr, "ckjit-inspect: --block needs a number of threads from 1 to 1024\n");
        return -1;
      }
      o->block = (int)n;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "ckjit-inspect: unknown option '%s' (see --help)\n", a);
      return -1;
    } else if (str_list_add_unique(&o->specs, a) != 0) {
      return -1;
    }
  }
  if (!o->specs.count) {
    fprintf(stderr, "ckjit-inspect: give a spec or a file to inspect (see --help)\n");
    return -1;
  }
  return 0;
}

/* The value of the spec's "threads" parameter, or 0. */
static int spec_threads(const ckjit_spec *spec) {
  const ckjit_family *fam = ckjit__family_get(spec->family);
  for (int i = 0; fam && i < fam->n_params; i++)
    if (!strcmp(fam->params[i].name, "threads")) return spec->value[i];
  return 0;
}

/* Reads a whole regular file (symbolic links are followed only when
 * `follow`) of a plausible size for an entry or code object.  Returns a
 * malloc'ed buffer or NULL with the reason in err. */
static uint8_t *read_file(const char *path, int follow, size_t *size_out, char *err, size_t len) {
  int e = 0;
  char *buf = file_read_all(path, FILE_READ_REGULAR | (follow ? 0 : FILE_READ_NOFOLLOW),
                            (size_t)CKJIT_ENTRY_MAX_PAYLOAD + 65536, size_out, &e);
  if (!buf)
    snprintf(err, len, "cannot read %.700s: %s", path,
             e == EINVAL || e == EFBIG || e == EISDIR ? "not a regular file of a plausible size" : strerror(e));
  return (uint8_t *)buf;
}

/* Verifies a cache entry (its key must be `hex` unless NULL) by the
 * library's rule for an entry's bytes, and points `payload` at its code
 * object.  Returns NULL, or the status to report: CKJIT_ERROR_CACHE when
 * the entry itself is damaged, CKJIT_ERROR_INVALID_ARGUMENT when it is
 * intact but its payload is not a code object for its arch (not ELF, another
 * machine, no such kernel): invalid input, not an internal error. */
static const char *decode_entry(const uint8_t *buf, size_t size, const char *hex,
                                ckjit_entry_meta *meta, const uint8_t **payload,
                                size_t *payload_size, const char *path, char *err, size_t len) {
  ckjit_key key;
  const char *why = "";
  if (hex && ckjit__key_parse(hex, &key) != 0) {
    snprintf(err, len, "bad cache key %s", hex);
    return "CKJIT_ERROR_CACHE";
  }
  if (ckjit__entry_decode(buf, size, hex ? &key : NULL, meta, payload, payload_size, &why) != 0) {
    snprintf(err, len, "the cache entry %.700s does not verify: %s", path, why);
    return "CKJIT_ERROR_CACHE";
  }
  if (ckjit__entry_accept_payload(meta, *payload, *payload_size, &why) != 0) {
    snprintf(err, len, "the cache entry %.700s holds no valid code object: %s", path, why);
    return "CKJIT_ERROR_INVALID_ARGUMENT";
  }
  return NULL;
}

static void put_count(FILE *out, const char *label, int64_t v, const char *unit) {
  if (v < 0) fprintf(out, "    %-18s unknown\n", label);
  else fprintf(out, "    %-18s %lld%s\n", label, (long long)v, unit);
}

static void text_kernel(const inspect_kernel *k, const occupancy *occ, int is_main) {
  printf("  kernel %s%s\n", k->name, is_main ? "" : " (not the family's entry point)");
  if (k->vendor == INSPECT_NVIDIA) {
    put_count(stdout, "registers", k->regs, " per thread");
    printf("    %-18s %lld B static", "shared memory", (long long)k->lds_bytes);
    if (k->reserved_smem > 0) printf(" (+%lld B per-block reserve)", (long long)k->reserved_smem);
    putchar('\n');
    put_count(stdout, "stack frame", k->local_bytes, " B per thread (local memory)");
    if (k->spill_bytes == 0) printf("    %-18s none\n", "spills");
    else printf("    %-18s unknown (up to the %lld B frame)\n", "spills", (long long)k->local_bytes);
    put_count(stdout, "constant bank 0", k->const0_bytes, " B");
    put_count(stdout, "parameters", k->param_bytes, " B");
    put_count(stdout, "barriers", k->barriers, "");
    put_count(stdout, "launch bound", k->max_threads, " threads");
    put_count(stdout, "code", k->code_bytes, " B");
  } else {
    printf("    %-18s VGPRs %lld, AGPRs %lld, SGPRs %lld\n", "registers", (long long)k->vgpr,
           (long long)k->agpr, (long long)k->sgpr);
    printf("    %-18s VGPRs %lld, SGPRs %lld\n", "spills", (long long)k->vgpr_spill,
           (long long)k->sgpr_spill);
    put_count(stdout, "LDS", k->lds_bytes, " B");
    put_count(stdout, "scratch", k->local_bytes, " B per lane");
    put_count(stdout, "wavefront", k->wavefront, "");
    put_count(stdout, "max work-group", k->max_threads, " threads");
  }
  if (!occ->known) {
    printf("    %-18s unknown: %s\n", "occupancy", occ->note);
    return;
  }
  int nv = k->vendor == INSPECT_NVIDIA;
  printf("    %-18s %.0f%%: %d %s x %d %s = %d of %d %s per %s (block %d), limited by %s\n",
         "occupancy", occ->fraction * 100, occ->blocks, nv ? "blocks" : "work-groups",
         occ->units_per_block, nv ? "warps" : "waves", occ->units, occ->max_units,
         nv ? "warps" : "waves", nv ? "SM" : "CU", occ->block, occ->limiter);
  if (!nv) printf("    %-18s %.2f waves per SIMD\n", "", occ->waves_per_simd);
  printf("    %-18s", "blocks allowed by");
  const char *names[] = {nv ? "registers" : "VGPRs", "SGPRs", nv ? "shared memory" : "LDS",
                         nv ? "warps" : "waves", nv ? "blocks" : "work-groups"};
  int vals[] = {occ->by_regs, occ->by_sgprs, occ->by_smem, occ->by_units, occ->by_blocks};
  int first = 1;
  for (int i = 0; i < 5; i++) {
    if (vals[i] < 0) continue;
    printf("%s %s %d", first ? "" : ",", names[i], vals[i]);
    first = 0;
  }
  putchar('\n');
  if (occ->note[0]) printf("    %-18s %s\n", "note", occ->note);
}

static void json_count(json_writer *w, const char *key, int64_t v) {
  if (v < 0) json_null(w, key);
  else json_int(w, key, v);
}

static void json_kernel(json_writer *w, const inspect_kernel *k, const occupancy *occ, int is_main) {
  json_begin_object(w, NULL);
  json_string(w, "name", k->name);
  json_bool(w, "entry", is_main);
  json_count(w, "max_threads", k->max_threads);
  if (k->vendor == INSPECT_NVIDIA) {
    json_count(w, "registers", k->regs);
    json_count(w, "shared_bytes", k->lds_bytes);
    json_count(w, "reserved_shared_bytes", k->reserved_smem);
    json_count(w, "local_bytes", k->local_bytes);
    json_count(w, "spill_bytes", k->spill_bytes);
    json_count(w, "min_stack_bytes", k->min_stack);
    json_count(w, "max_stack_bytes", k->max_stack);
    json_count(w, "crs_stack_bytes", k->crs_stack);
    json_count(w, "constant0_bytes", k->const0_bytes);
    json_count(w, "param_bytes", k->param_bytes);
    json_count(w, "max_registers", k->max_regs);
    json_count(w, "barriers", k->barriers);
    json_count(w, "code_bytes", k->code_bytes);
  } else {
    json_count(w, "vgpr_count", k->vgpr);
    json_count(w, "agpr_count", k->agpr);
    json_count(w, "sgpr_count", k->sgpr);
    json_count(w, "vgpr_spill_count", k->vgpr_spill);
    json_count(w, "sgpr_spill_count", k->sgpr_spill);
    json_count(w, "lds_bytes", k->lds_bytes);
    json_count(w, "scratch_bytes", k->local_bytes);
    json_count(w, "wavefront_size", k->wavefront);
    json_count(w, "kernarg_bytes", k->kernarg_bytes);
    if (k->dynamic_stack >= 0) json_bool(w, "dynamic_stack", k->dynamic_stack);
  }
  json_begin_object(w, "occupancy");
  json_bool(w, "known", occ->known);
  if (occ->known) {
    int nv = k->vendor == INSPECT_NVIDIA;
    json_int(w, "block", occ->block);
    json_int(w, nv ? "warps_per_block" : "waves_per_workgroup", occ->units_per_block);
    json_int(w, nv ? "blocks_per_sm" : "workgroups_per_cu", occ->blocks);
    json_int(w, nv ? "warps_per_sm" : "waves_per_cu", occ->units);
    json_int(w, nv ? "max_warps_per_sm" : "max_waves_per_cu", occ->max_units);
    if (!nv) json_double(w, "waves_per_simd", occ->waves_per_simd);
    json_double(w, "occupancy", occ->fraction);
    json_string(w, "limited_by", occ->limiter);
    json_begin_object(w, "blocks_allowed_by");
    if (occ->by_regs >= 0) json_int(w, nv ? "registers" : "vgprs", occ->by_regs);
    if (occ->by_sgprs >= 0) json_int(w, "sgprs", occ->by_sgprs);
    if (occ->by_smem >= 0) json_int(w, nv ? "shared_memory" : "lds", occ->by_smem);
    if (occ->by_units >= 0) json_int(w, nv ? "warps" : "waves", occ->by_units);
    if (occ->by_blocks >= 0) json_int(w, nv ? "blocks" : "workgroups", occ->by_blocks);
    json_end_object(w);
  }
  if (occ->note[0]) json_string(w, "note", occ->note);
  json_end_object(w);
  json_end_object(w);
}

/* What one inspected item is: a (spec, arch) or a file. */
typedef struct item {
  const char *spec;  /* canonical spec, or NULL for a file */
  const char *file;  /* a cache entry or code object file, or NULL */
  const char *arch;  /* the arch it was built for ("" when unknown) */
  const char *key;   /* cache key (32 hex digits), or NULL */
  const char *main_kernel; /* the family's kernel name, or NULL */
  int cached;        /* spec: found in the cache */
  size_t code_size;
  int block;         /* threads per block for the occupancy; 0: launch bound or 256 */
} item;

static void emit(json_writer *w, const item *it, const inspect_object *obj) {
  const char *arch = it->arch[0] ? it->arch : obj->target;
  if (w) {
    json_begin_object(w, NULL);
    if (it->spec) json_string(w, "spec", it->spec);
    if (it->file) json_string(w, "file", it->file);
    json_string(w, "arch", arch);
    json_string(w, "result", "ok");
    if (it->key) json_string(w, "key", it->key);
    if (it->spec) json_bool(w, "cached", it->cached);
    json_uint(w, "code_size", it->code_size);
    json_string(w, "target", obj->target);
    json_begin_array(w, "kernels");
  } else if (it->spec) {
    printf("%s for %s: key %s, %zu B code object (%s), target %s\n", it->spec, arch, it->key,
           it->code_size, it->cached ? "from the cache" : "compiled", obj->target);
  } else {
    printf("%s: %s%s%s%zu B code object for %s\n", it->file, it->key ? "cache entry, key " : "",
           it->key ? it->key : "", it->key ? ", " : "", it->code_size, arch);
  }
  for (size_t i = 0; i < obj->n_kernels; i++) {
    const inspect_kernel *k = &obj->kernels[i];
    int block = it->block > 0 ? it->block : k->max_threads > 0 ? (int)k->max_threads : 256;
    occupancy occ;
    occupancy_compute(arch, k, block, &occ);
    int is_main = !it->main_kernel || !strcmp(k->name, it->main_kernel);
    if (w) json_kernel(w, k, &occ, is_main);
    else text_kernel(k, &occ, is_main);
  }
  if (w) {
    json_end_array(w);
    json_end_object(w);
  } else if (!obj->n_kernels) {
    printf("  (no kernels found)\n");
  }
}

static int report_failure(json_writer *w, const char *spec, const char *file, const char *arch,
                          const char *status, const char *err) {
  if (w) {
    json_begin_object(w, NULL);
    if (spec) json_string(w, "spec", spec);
    if (file) json_string(w, "file", file);
    json_string(w, "arch", arch);
    json_string(w, "result", "failed");
    json_string(w, "status", status);
    json_string(w, "error", err);
    json_end_object(w);
  }
  fflush(stdout);
  fprintf(stderr, "ckjit-inspect: %s%s%s: %s: %s\n", spec ? spec : file, arch[0] ? " for " : "",
          arch, status, err);
  return -1;
}

/* Inspects one (spec, arch): compile or find it, read the entry back. */
static int inspect_spec(const options *o, const char *cache_dir, const char *spec_text,
                        const char *arch, json_writer *w) {
  char err[1024] = "", canon[CKJIT_SPEC_TEXT_MAX] = "";
  ckjit_spec spec;
  ckjit_status st = ckjit__spec_parse(spec_text, &spec);
  if (st == CKJIT_SUCCESS) st = ckjit__spec_format(&spec, canon, sizeof canon);
  if (st != CKJIT_SUCCESS)
    return report_failure(w, spec_text, NULL, arch, ckjit_status_string(st), ckjit_last_error());
  ckjit_compile_result res;
  memset(&res, 0, sizeof res);
  st = ckjit_compile_spec(canon, arch, &res);
  if (st != CKJIT_SUCCESS)
    return report_failure(w, canon, NULL, arch, ckjit_status_string(st), ckjit_last_error());

  char path[4096];
  snprintf(path, sizeof path, "%s/%.2s/%s.ckjit", cache_dir, res.key, res.key);
  size_t size = 0, payload_size = 0;
  const uint8_t *payload;
  ckjit_entry_meta meta;
  uint8_t *file = read_file(path, 0, &size, err, sizeof err);
  const char *bad = file ? decode_entry(file, size, res.key, &meta, &payload, &payload_size, path,
                                        err, sizeof err)
                         : "CKJIT_ERROR_CACHE";
  if (bad) {
    free(file);
    return report_failure(w, canon, NULL, arch, bad, err);
  }
  inspect_object obj;
  if (inspect_code_object(payload, payload_size, &obj, err, sizeof err) != 0) {
    free(file);
    return report_failure(w, canon, NULL, arch, "CKJIT_ERROR_INTERNAL", err);
  }
  int block = o->block ? o->block : spec_threads(&spec);
  item it = {canon, NULL, arch, res.key, res.kernel, res.cached, res.code_size, block};
  emit(w, &it, &obj);
  inspect_object_free(&obj);
  free(file);
  return 0;
}

/* Inspects a cache entry file (<key>.ckjit) or a bare code object. */
static int inspect_file(const options *o, const char *path, json_writer *w) {
  char err[1024] = "", hex[33] = "";
  size_t size = 0, payload_size = 0;
  const uint8_t *payload;
  ckjit_entry_meta meta;
  memset(&meta, 0, sizeof meta);
  uint8_t *file = read_file(path, 1, &size, err, sizeof err);
  if (!file) return report_failure(w, NULL, path, "", "CKJIT_ERROR_CACHE", err);
  int is_entry = size >= 8 && !memcmp(file, CKJIT_ENTRY_MAGIC, 8);
  if (is_entry) {
    const char *bad =
        decode_entry(file, size, NULL, &meta, &payload, &payload_size, path, err, sizeof err);
    if (bad) {
      free(file);
      return report_failure(w, NULL, path, meta.arch, bad, err);
    }
    ckjit__key_hex(&meta.key, hex);
  } else {
    payload = file;
    payload_size = size;
  }
  inspect_object obj;
  if (inspect_code_object(payload, payload_size, &obj, err, sizeof err) != 0) {
    free(file);
    return report_failure(w, NULL, path, meta.arch, "CKJIT_ERROR_INVALID_ARGUMENT", err);
  }
  item it = {NULL, path, meta.arch, is_entry ? hex : NULL, is_entry ? meta.kernel : NULL, 0,
             payload_size, o->block};
  emit(w, &it, &obj);
  inspect_object_free(&obj);
  free(file);
  return 0;
}

/* An argument names a file (rather than a spec) when it is a regular file. */
static int is_file_arg(const char *a) {
  struct stat st;
  return stat(a, &st) == 0 && S_ISREG(st.st_mode);
}

int main(int argc, char **argv) {
  options o;
  memset(&o, 0, sizeof o);
  if (parse_args(argc, argv, &o) != 0) {
    str_list_free(&o.specs);
    str_list_free(&o.archs);
    return 2;
  }
  int rc = 1, n_specs = 0;
  for (size_t i = 0; i < o.specs.count; i++) n_specs += !is_file_arg(o.specs.items[i]);
  /* Compile-only: with the archs given no GPU is needed, so none is opened. */
  if (o.archs.count || !n_specs) {
    setenv("CUDA_VISIBLE_DEVICES", "-1", 1);
    setenv("HIP_VISIBLE_DEVICES", "-1", 1);
  }
  ckjit_options opts;
  ckjit_options_init(&opts);
  opts.cache_dir = o.cache_dir;
  opts.disk_cache = 1; /* the code object is read back from its cache entry */
  ckjit_device_info info;
  memset(&info, 0, sizeof info);
  json_writer w;
  int failed = 0;
  if (n_specs) {
    ckjit_status st = ckjit_init(&opts);
    if (st == CKJIT_SUCCESS) st = ckjit_get_device_info(&info);
    if (st != CKJIT_SUCCESS) {
      fprintf(stderr, "ckjit-inspect: cannot initialize ckjit (%s): %s\n", ckjit_status_string(st),
              ckjit_last_error());
      goto out;
    }
    if (!info.cache_dir[0]) {
      char dir[CKJIT_PATH_MAX];
      if (ckjit__disk_default_dir(o.cache_dir, dir, sizeof dir) != 0) /* which setting, and why */
        fprintf(stderr, "ckjit-inspect: %s; pass a writable --cache-dir\n", ckjit_last_error());
      else
        fprintf(stderr,
                "ckjit-inspect: the disk cache is unusable%s%s; pass a writable --cache-dir\n",
                o.cache_dir ? ": " : "", o.cache_dir ? o.cache_dir : "");
      goto out;
    }
    if (!o.archs.count) {
      if (!info.arch[0]) {
        fprintf(stderr, "ckjit-inspect: no target arch: there is no GPU and CKJIT_ARCH is not "
                        "set; pass --arch, e.g. --arch sm_90,gfx90a\n");
        rc = 2;
        goto out;
      }
      if (str_list_add_unique(&o.archs, info.arch) != 0) goto out;
    }
  }
  if (o.json) {
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    if (n_specs) json_string(&w, "cache_dir", info.cache_dir);
    json_begin_array(&w, "items");
  }
  int first = 1;
  for (size_t s = 0; s < o.specs.count; s++) {
    const char *a = o.specs.items[s];
    if (!is_file_arg(a)) continue;
    if (!o.json && !first) putchar('\n');
    first = 0;
    failed += inspect_file(&o, a, o.json ? &w : NULL) != 0;
  }
  for (size_t ar = 0; n_specs && ar < o.archs.count; ar++)
    for (size_t s = 0; s < o.specs.count; s++) {
      if (is_file_arg(o.specs.items[s])) continue;
      if (!o.json && !first) putchar('\n');
      first = 0;
      failed += inspect_spec(&o, info.cache_dir, o.specs.items[s], o.archs.items[ar],
                             o.json ? &w : NULL) != 0;
    }
  if (o.json) {
    json_end_array(&w);
    json_uint(&w, "failed", (uint64_t)failed);
    json_end_object(&w);
    json_finish(&w);
  }
  rc = failed ? 1 : 0;
out:
  fflush(stdout);
  str_list_free(&o.specs);
  str_list_free(&o.archs);
  ckjit_shutdown();
  return rc;
}
