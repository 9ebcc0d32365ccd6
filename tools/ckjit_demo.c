/* ckjit-demo: the library's main job, end to end.
 *
 * With a GPU: allocates device buffers, runs copy2d, unary (gelu_tanh with an
 * epilogue), binary (add), transpose and gemm (bias + gelu_tanh fused) on
 * f32 and bf16 data, checks every
 * result against a CPU reference and prints timings (first call, which
 * compiles or loads the kernel, against a repeated call) and the statistics.
 *
 * Without a GPU: says why, prewarms the default specs for a default arch list
 * (sm_90,gfx90a) into the disk cache and lists the cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache_listing.h"
#include "ckjit/ckjit.h"
#include "demo_ops.h"
#include "json_writer.h"
#include "prewarm_job.h"
#include "str_list.h"
#include "wall_clock.h"

#define DEMO_DEFAULT_ARCHS "sm_90,gfx90a"

static void usage(FILE *out) {
  fputs(
      "usage: ckjit-demo [options]\n"
      "\n"
      "With a GPU: runs copy2d, unary (gelu_tanh + epilogue), binary (add),\n"
      "transpose and gemm (fused bias + gelu_tanh) on device buffers, checks them\n"
      "against a CPU reference and prints\n"
      "timings (first call incl. compile vs repeated call) and ckjit's statistics.\n"
      "Without a GPU: prints why, prewarms the default specs into the disk cache\n"
      "(compile-only) and lists the cache.\n"
      "\n"
      "options:\n"
      "  --rows N          rows of the test matrices (default 1024)\n"
      "  --cols N          columns (default 1000)\n"
      "  --dtype LIST      data types to test: f32, bf16, f16 (default f32,bf16)\n"
      "  --arch LIST       archs to prewarm without a GPU (default " DEMO_DEFAULT_ARCHS ")\n"
      "  --cache-dir DIR   cache directory (default: CKJIT_CACHE_DIR,\n"
      "                    XDG_CACHE_HOME/ckjit, ~/.cache/ckjit)\n"
      "  --json            machine-readable output on stdout\n"
      "  -h, --help        this help\n"
      "\n"
      "Exit status: 0 when everything ran and every check passed, 1 otherwise,\n"
      "2 on a usage error.\n",
      out);
}

typedef struct options {
  int64_t rows, cols;
  str_list dtypes;
  str_list archs;
  const char *cache_dir;
  int json;
} options;

/* ---- output helpers ---------------------------------------------------------- */

static void print_stats(FILE *out, const ckjit_stats *s) {
  fprintf(out,
          "stats: memory hits %llu, disk hits %llu, disk misses %llu, disk rejects %llu,\n"
          "       disk writes %llu (errors %llu), compiles %llu (failures %llu, %.1f ms),\n"
          "       loads %llu (failures %llu, %.1f ms)\n",
          (unsigned long long)s->memory_hits, (unsigned long long)s->disk_hits,
          (unsigned long long)s->disk_misses, (unsigned long long)s->disk_rejects,
          (unsigned long long)s->disk_writes, (unsigned long long)s->disk_write_errors,
          (unsigned long long)s->compiles, (unsigned long long)s->compile_failures,
          s->compile_ms, (unsigned long long)s->loads, (unsigned long long)s->load_failures,
          s->load_ms);
}

static void json_stats(json_writer *w, const char *key, const ckjit_stats *s) {
  json_begin_object(w, key);
  json_uint(w, "memory_hits", s->memory_hits);
  json_uint(w, "disk_hits", s->disk_hits);
  json_uint(w, "disk_misses", s->disk_misses);
  json_uint(w, "disk_rejects", s->disk_rejects);
  json_uint(w, "disk_writes", s->disk_writes);
  json_uint(w, "disk_write_errors", s->disk_write_errors);
  json_uint(w, "compiles", s->compiles);
  json_uint(w, "compile_failures", s->compile_failures);
  json_uint(w, "loads", s->loads);
  json_uint(w, "load_failures", s->load_failures);
  json_double(w, "compile_ms", s->compile_ms);
  json_double(w, "load_ms", s->load_ms);
  json_end_object(w);
}

static const char *backend_name(ckjit_backend b) {
  return b == CKJIT_BACKEND_CUDA ? "cuda" : b == CKJIT_BACKEND_HIP ? "hip" : "none";
}

static void json_device(json_writer *w, const ckjit_device_info *info) {
  json_begin_object(w, "device");
  json_string(w, "backend", backend_name(info->backend));
  json_bool(w, "has_device", info->has_device);
  json_int(w, "ordinal", info->device);
  json_string(w, "name", info->name);
  json_string(w, "arch", info->arch);
  json_string(w, "device_arch", info->device_arch);
  json_int(w, "multiprocessors", info->multiprocessors);
  json_string(w, "compiler", info->compiler);
  json_string(w, "cache_dir", info->cache_dir);
  json_end_object(w);
}

/* ---- GPU path ---------------------------------------------------------------- */

static int parse_dtype(const char *s, ckjit_dtype *out) {
  if (strcmp(s, "f32") == 0) *out = CKJIT_F32;
  else if (strcmp(s, "bf16") == 0) *out = CKJIT_BF16;
  else if (strcmp(s, "f16") == 0) *out = CKJIT_F16;
  else return -1;
  return 0;
}

static int run_gpu(const options *o, const ckjit_device_info *info) {
  static const char *const ops[] = {"copy2d", "unary", "binary", "transpose", "gemm"};
  enum { N_OPS = sizeof ops / sizeof ops[0] };
  demo d;
  memset(&d, 0, sizeof d);
  d.rows = o->rows;
  d.cols = o->cols;
  d.n = (size_t)(o->rows * o->cols);
  d.ld_pad = o->cols + 24;
  int failed = 0;
  json_writer w;

  if (o->json) {
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    json_string(&w, "mode", "gpu");
    json_device(&w, info);
    json_int(&w, "rows", d.rows);
    json_int(&w, "cols", d.cols);
    json_int(&w, "repeats", DEMO_REPEATS);
    json_begin_array(&w, "ops");
  } else {
    printf("device: %s (%s, %s, %d SMs/CUs), compiler %s\n", info->name,
           backend_name(info->backend), info->arch, info->multiprocessors,
           info->compiler[0] ? info->compiler : "(not loaded yet)");
    printf("cache:  %s\n", info->cache_dir[0] ? info->cache_dir : "(disk cache off)");
    printf("data:   %lld x %lld, first call (incl. compile/load) vs mean of %d repeats\n\n",
           (long long)d.rows, (long long)d.cols, DEMO_REPEATS);
    printf("%-10s %-5s %12s  %-10s %12s  %10s  %s\n", "op", "dtype", "first", "(kernel)",
           "repeat", "max err", "check");
  }

  if (demo_alloc(&d) != 0) {
    failed = 1;
  } else {
    for (size_t t = 0; t < o->dtypes.count; t++) {
      ckjit_dtype dt = CKJIT_F32;
      (void)parse_dtype(o->dtypes.items[t], &dt);
      if (demo_upload(&d, dt) != 0) {
        failed = 1;
        break;
      }
      for (size_t k = 0; k < N_OPS; k++) {
        op_report r;
        demo_run_op(&d, dt, ops[k], &r);
        if (!r.ok) failed = 1;
        if (o->json) {
          json_begin_object(&w, NULL);
          json_string(&w, "op", r.op);
          json_string(&w, "dtype", ckjit_dtype_name(dt));
          json_bool(&w, "ok", r.ok);
          if (r.error[0]) {
            json_string(&w, "error", r.error);
          } else {
            json_double(&w, "first_ms", r.first_ms);
            json_string(&w, "first_kernel_from", r.first_how);
            json_double(&w, "repeat_ms", r.repeat_ms);
            json_double(&w, "max_rel_err", r.max_err);
            json_uint(&w, "mismatches", r.mismatches);
          }
          json_end_object(&w);
        } else if (r.error[0]) {
          printf("%-10s %-5s  FAILED: %s\n", r.op, ckjit_dtype_name(dt), r.error);
          fprintf(stderr, "ckjit-demo: %s %s failed: %s\n", r.op, ckjit_dtype_name(dt), r.error);
        } else {
          char check[64];
          if (r.ok) snprintf(check, sizeof check, "ok");
          else snprintf(check, sizeof check, "MISMATCH (%zu)", r.mismatches);
          printf("%-10s %-5s %9.3f ms  %-10s %9.4f ms  %10.2e  %s\n", r.op, ckjit_dtype_name(dt),
                 r.first_ms, r.first_how, r.repeat_ms, r.max_err, check);
        }
      }
    }
  }
  demo_free(&d);

  ckjit_stats s;
  ckjit_get_stats(&s);
  if (o->json) {
    json_end_array(&w);
    json_stats(&w, "stats", &s);
    json_bool(&w, "ok", !failed);
    json_end_object(&w);
    json_finish(&w);
  } else {
    printf("\n");
    print_stats(stdout, &s);
    printf("%s\n", failed ? "FAILED" : "all checks passed");
  }
  return failed ? 1 : 0;
}

/* ---- compile-only path --------------------------------------------------------- */

typedef struct prewarm_state {
  const prewarm_plan *plan;
  prewarm_summary summary;
  json_writer *json;
  size_t done;
} prewarm_state;

static void on_prewarm_result(void *ctx, size_t index, const prewarm_result *r) {
  prewarm_state *s = ctx;
  prewarm_summary_add(&s->summary, r);
  s->done++;
  if (s->json) {
    prewarm_json_result(s->json, &s->plan->jobs[index], r);
  } else {
    prewarm_print_line(stdout, s->done - 1, s->plan->count, &s->plan->jobs[index], r, 0);
    fflush(stdout);
  }
  if (r->status != CKJIT_SUCCESS) {
    char line[300];
    prewarm_error_first_line(r, line, sizeof line);
    fprintf(stderr, "ckjit-demo: %s %s failed: %s\n", s->plan->jobs[index].arch,
            s->plan->jobs[index].spec, line);
  }
}

static int run_compile_only(const options *o, const ckjit_device_info *info,
                            const char *reason) {
  int failed = 0;
  json_writer w;
  str_list specs = {0};
  prewarm_plan plan = {0};
  prewarm_state ps;
  memset(&ps, 0, sizeof ps);

  if (o->json) {
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    json_string(&w, "mode", "compile-only");
    json_string(&w, "no_device_reason", reason);
    json_device(&w, info);
  } else {
    printf("no usable GPU: %s\n", reason);
    printf("running compile-only: prewarming the default specs into the disk cache\n");
  }
  if (!info->cache_dir[0]) {
    fprintf(stderr, "ckjit-demo: the disk cache is disabled or unusable; pass a writable "
                    "--cache-dir\n");
    failed = 1;
  } else if (prewarm_add_default_specs(&specs) != 0 ||
             prewarm_plan_build(&plan, &specs, &o->archs) != 0) {
    failed = 1;
  } else {
    if (o->json) {
      json_begin_object(&w, "prewarm");
      json_begin_array(&w, "items");
      ps.json = &w;
    } else {
      printf("cache: %s\n", info->cache_dir);
      printf("%zu default specs x %zu archs (", specs.count, o->archs.count);
      for (size_t i = 0; i < o->archs.count; i++)
        printf("%s%s", i ? "," : "", o->archs.items[i]);
      printf(")\n");
    }
    ps.plan = &plan;
    double t0 = wall_clock_ms();
    prewarm_run_plan(&plan, on_prewarm_result, &ps);
    ps.summary.wall_ms = wall_clock_ms() - t0;
    ps.summary.no_kernel = plan.no_kernel;
    if (ps.summary.failed) failed = 1;
    if (o->json) {
      json_end_array(&w);
      prewarm_json_summary(&w, "summary", &ps.summary);
      json_end_object(&w);
    } else {
      prewarm_print_summary(stdout, &ps.summary);
    }

    /* The cache as it is now. */
    cache_listing l;
    char err[1200];
    int64_t now = (int64_t)time(NULL);
    if (cache_listing_read(&l, info->cache_dir, 1, err, sizeof err) != 0) {
      fprintf(stderr, "ckjit-demo: cannot list the cache: %s\n", err);
      failed = 1;
    } else {
      if (o->json) {
        json_begin_object(&w, "cache");
        json_string(&w, "dir", info->cache_dir);
        json_uint(&w, "bytes", l.entry_bytes);
        cache_listing_json_entries(&w, "entries", &l, now);
        json_end_object(&w);
      } else {
        char size[32];
        cache_format_size(l.entry_bytes, size, sizeof size);
        printf("\ncache %s: %zu entries, %s\n", info->cache_dir, l.entries, size);
        cache_listing_print_entries(stdout, &l, now);
      }
      if (l.bad) {
        fprintf(stderr, "ckjit-demo: %zu bad item%s in the cache (ckjit-cache verify)\n", l.bad,
                l.bad == 1 ? "" : "s");
        failed = 1;
      }
      cache_listing_free(&l);
    }
  }

  ckjit_stats s;
  ckjit_get_stats(&s);
  if (o->json) {
    json_stats(&w, "stats", &s);
    json_bool(&w, "ok", !failed);
    json_end_object(&w);
    json_finish(&w);
  } else {
    printf("\n");
    print_stats(stdout, &s);
  }
  prewarm_plan_free(&plan);
  str_list_free(&specs);
  return failed ? 1 : 0;
}

/* ---- main ---------------------------------------------------------------------- */

static int parse_int(const char *s, int64_t *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (end == s || *end || v <= 0 || v > (1 << 20)) return -1;
  *out = v;
  return 0;
}

static int parse_args(int argc, char **argv, options *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = strcmp(a, "--rows") == 0 || strcmp(a, "--cols") == 0 ||
                strcmp(a, "--dtype") == 0 || strcmp(a, "--arch") == 0 ||
                strcmp(a, "--cache-dir") == 0;
    if (takes && !v) {
      fprintf(stderr, "ckjit-demo: %s needs a value (see --help)\n", a);
      return -1;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(a, "--json") == 0) {
      o->json = 1;
    } else if (strcmp(a, "--rows") == 0 || strcmp(a, "--cols") == 0) {
      if (parse_int(v, a[2] == 'r' ? &o->rows : &o->cols) != 0) {
        fprintf(stderr, "ckjit-demo: %s wants a positive integer up to 1048576, not '%s'\n", a, v);
        return -1;
      }
      i++;
    } else if (strcmp(a, "--dtype") == 0) {
      if (str_list_add_csv(&o->dtypes, v) <= 0) {
        fprintf(stderr, "ckjit-demo: bad --dtype '%s'\n", v);
        return -1;
      }
      i++;
    } else if (strcmp(a, "--arch") == 0) {
      if (str_list_add_csv(&o->archs, v) <= 0) {
        fprintf(stderr, "ckjit-demo: bad --arch '%s'\n", v);
        return -1;
      }
      i++;
    } else if (strcmp(a, "--cache-dir") == 0) {
      if (!*v) {
        fprintf(stderr, "ckjit-demo: --cache-dir must not be empty\n");
        return -1;
      }
      o->cache_dir = v;
      i++;
    } else {
      fprintf(stderr, "ckjit-demo: unknown argument '%s' (see --help)\n", a);
      return -1;
    }
  }
  if (o->dtypes.count == 0 && str_list_add_csv(&o->dtypes, "f32,bf16") <= 0) return -1;
  for (size_t i = 0; i < o->dtypes.count; i++) {
    ckjit_dtype dt = CKJIT_F32;
    if (parse_dtype(o->dtypes.items[i], &dt) != 0) {
      fprintf(stderr, "ckjit-demo: unknown dtype '%s' (f32, bf16, f16)\n", o->dtypes.items[i]);
      return -1;
    }
  }
  if ((size_t)o->rows * (size_t)o->cols > ((size_t)1 << 28)) {
    fprintf(stderr, "ckjit-demo: %lld x %lld is too large for a demo\n", (long long)o->rows,
            (long long)o->cols);
    return -1;
  }
  if (o->archs.count == 0 && str_list_add_csv(&o->archs, DEMO_DEFAULT_ARCHS) <= 0) return -1;
  return 0;
}

int main(int argc, char **argv) {
  options o;
  memset(&o, 0, sizeof o);
  o.rows = 1024;
  o.cols = 1000;
  int rc = 1;
  if (parse_args(argc, argv, &o) != 0) {
    rc = 2;
    goto out;
  }

  ckjit_options opts;
  ckjit_options_init(&opts);
  opts.cache_dir = o.cache_dir;
  ckjit_status st = ckjit_init(&opts);
  if (st != CKJIT_SUCCESS) {
    fprintf(stderr, "ckjit-demo: ckjit_init failed (%s): %s\n", ckjit_status_string(st),
            ckjit_last_error());
    goto out;
  }
  ckjit_device_info info;
  memset(&info, 0, sizeof info);
  st = ckjit_get_device_info(&info);
  if (st != CKJIT_SUCCESS) {
    fprintf(stderr, "ckjit-demo: ckjit_get_device_info failed (%s): %s\n",
            ckjit_status_string(st), ckjit_last_error());
    goto out;
  }
  if (info.has_device) {
    rc = run_gpu(&o, &info);
  } else {
    /* An op on a host without a GPU fails and says why. */
    void *p = NULL;
    st = ckjit_malloc(&p, 256);
    if (st == CKJIT_SUCCESS) {
      ckjit_free(p);
      fprintf(stderr, "ckjit-demo: ckjit_get_device_info says there is no device, but "
                      "ckjit_malloc succeeded\n");
      goto out;
    }
    char reason[1024];
    const char *e = ckjit_last_error();
    snprintf(reason, sizeof reason, "%s: %s", ckjit_status_string(st),
             *e ? e : "(no message from the library)");
    rc = run_compile_only(&o, &info, reason);
  }
out:
  ckjit_shutdown();
  str_list_free(&o.dtypes);
  str_list_free(&o.archs);
  return rc;
}
