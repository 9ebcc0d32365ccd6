/* ckjit-prewarm: compile kernel specializations into the disk cache ahead of
 * time, so that the first op call at run time loads instead of compiling.
 *
 *   ckjit-prewarm [--arch LIST] [--cache-dir DIR] [--json] (--all | SPEC...)
 *
 * No GPU is needed: every (spec, arch) pair goes through ckjit_compile_spec.
 * A bad spec or arch fails only its own items. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "json_writer.h"
#include "prewarm_job.h"
#include "str_list.h"
#include "wall_clock.h"

static void usage(FILE *out) {
  fputs(
      "usage: ckjit-prewarm [options] SPEC...\n"
      "       ckjit-prewarm [options] --all\n"
      "\n"
      "Compiles kernel specializations into the ckjit disk cache ahead of time\n"
      "(no GPU needed).  A SPEC is \"family:key=value,...\"; omitted keys take\n"
      "their defaults, e.g.\n"
      "  elementwise:dtype=bf16,op=gelu_tanh,arity=1\n"
      "  transpose:dtype=f32\n"
      "\n"
      "options:\n"
      "  --all             every default specialization (ckjit_default_spec)\n"
      "  --arch LIST       comma-separated target archs, both vendors allowed,\n"
      "                    e.g. gfx90a,gfx1030,sm_90 (default: the configured arch:\n"
      "                    CKJIT_ARCH or the GPU's)\n"
      "  --cache-dir DIR   cache directory (default: CKJIT_CACHE_DIR,\n"
      "                    XDG_CACHE_HOME/ckjit, ~/.cache/ckjit); the disk cache is\n"
      "                    always on for prewarm\n"
      "  --json            machine-readable output on stdout (no progress lines)\n"
      "  -q, --quiet       print only failures and the summary\n"
      "  -v, --verbose     print the complete error (compiler log) of failures\n"
      "  --list            print the (spec, arch) pairs and exit without compiling\n"
      "  -h, --help        this help\n"
      "\n"
      "Exit status: 0 when every item compiled or was cached, 1 when any failed,\n"
      "2 on a usage error.\n",
      out);
}

typedef struct options {
  str_list specs;
  str_list archs;
  const char *cache_dir;
  int all, json, quiet, verbose, list;
} options;

/* Collects results as they complete (in any order, for a later worker model). */
typedef struct run_state {
  const options *opt;
  const prewarm_plan *plan;
  prewarm_summary summary;
  json_writer *json;
  size_t done;
  char (*failures)[300]; /* per plan index: first error line, "" if none */
} run_state;

static void on_result(void *ctx, size_t index, const prewarm_result *r) {
  run_state *s = ctx;
  const prewarm_job *job = &s->plan->jobs[index];
  prewarm_summary_add(&s->summary, r);
  s->done++;
  if (r->status != CKJIT_SUCCESS && s->failures) {
    char line[256];
    prewarm_error_first_line(r, line, sizeof line);
    snprintf(s->failures[index], sizeof s->failures[index], "%s: %s",
             ckjit_status_string((ckjit_status)r->status), line);
  }
  if (s->json) {
    prewarm_json_result(s->json, job, r);
  } else if (!s->opt->quiet || r->status != CKJIT_SUCCESS) {
    /* The counter shows completions, so it stays monotonic with workers. */
    prewarm_print_line(stdout, s->done - 1, s->plan->count, job, r, s->opt->verbose);
    fflush(stdout);
  }
}

static int parse_args(int argc, char **argv, options *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *value = NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(a, "--all") == 0) {
      o->all = 1;
    } else if (strcmp(a, "--json") == 0) {
      o->json = 1;
    } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
      o->quiet = 1;
    } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
      o->verbose = 1;
    } else if (strcmp(a, "--list") == 0) {
      o->list = 1;
    } else if (strcmp(a, "--arch") == 0 || strncmp(a, "--arch=", 7) == 0) {
      if (a[6] == '=') value = a + 7;
      else if (i + 1 < argc) value = argv[++i];
      else {
        fprintf(stderr, "ckjit-prewarm: --arch needs a list, e.g. --arch sm_90,gfx90a\n");
        return -1;
      }
      int n = str_list_add_csv(&o->archs, value);
      if (n < 0) {
        fprintf(stderr, "ckjit-prewarm: out of memory\n");
        return -1;
      }
      if (n == 0) {
        fprintf(stderr, "ckjit-prewarm: --arch '%s' names no arch\n", value);
        return -1;
      }
    } else if (strcmp(a, "--cache-dir") == 0 || strncmp(a, "--cache-dir=", 12) == 0) {
      if (a[11] == '=') value = a + 12;
      else if (i + 1 < argc) value = argv[++i];
      else {
        fprintf(stderr, "ckjit-prewarm: --cache-dir needs a directory\n");
        return -1;
      }
      if (!*value) {
        fprintf(stderr, "ckjit-prewarm: --cache-dir must not be empty\n");
        return -1;
      }
      o->cache_dir = value;
    } else if (strcmp(a, "--") == 0) {
      for (i++; i < argc; i++)
        if (str_list_add_unique(&o->specs, argv[i]) != 0) return -1;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "ckjit-prewarm: unknown option '%s' (see --help)\n", a);
      return -1;
    } else if (str_list_add_unique(&o->specs, a) != 0) {
      fprintf(stderr, "ckjit-prewarm: out of memory\n");
      return -1;
    }
  }
  if (!o->all && o->specs.count == 0) {
    fprintf(stderr, "ckjit-prewarm: give specs to compile or --all (see --help)\n");
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  options o;
  memset(&o, 0, sizeof o);
  if (parse_args(argc, argv, &o) != 0) return 2;

  int rc = 1;
  prewarm_plan plan = {0};
  run_state state;
  memset(&state, 0, sizeof state);

  ckjit_options opts;
  ckjit_options_init(&opts);
  opts.cache_dir = o.cache_dir;
  opts.disk_cache = 1; /* prewarm exists to fill the disk cache */
  ckjit_status st = ckjit_init(&opts);
  if (st != CKJIT_SUCCESS) {
    fprintf(stderr, "ckjit-prewarm: ckjit_init failed (%s): %s\n", ckjit_status_string(st),
            ckjit_last_error());
    goto out;
  }
  ckjit_device_info info;
  memset(&info, 0, sizeof info);
  st = ckjit_get_device_info(&info);
  if (st != CKJIT_SUCCESS) {
    fprintf(stderr, "ckjit-prewarm: ckjit_get_device_info failed (%s): %s\n",
            ckjit_status_string(st), ckjit_last_error());
    goto out;
  }
  if (!info.cache_dir[0]) {
    fprintf(stderr,
            "ckjit-prewarm: the disk cache is unusable%s%s (see the warning above); "
            "pass a writable --cache-dir\n",
            o.cache_dir ? ": " : "", o.cache_dir ? o.cache_dir : "");
    goto out;
  }
  if (o.archs.count == 0) {
    if (!info.arch[0]) {
      fprintf(stderr,
              "ckjit-prewarm: no target arch: there is no GPU and CKJIT_ARCH is not set;\n"
              "  pass --arch, e.g. --arch sm_90 or --arch gfx90a,gfx1030,sm_90\n");
      rc = 2;
      goto out;
    }
    if (str_list_add_unique(&o.archs, info.arch) != 0) goto oom;
  }
  if (o.all && prewarm_add_default_specs(&o.specs) != 0) goto out;
  if (prewarm_plan_build(&plan, &o.specs, &o.archs) != 0) goto oom;

  json_writer w;
  if (o.list) {
    if (o.json) {
      json_init(&w, stdout);
      json_begin_array(&w, NULL);
      for (size_t i = 0; i < plan.count; i++) {
        json_begin_object(&w, NULL);
        json_string(&w, "arch", plan.jobs[i].arch);
        json_string(&w, "spec", plan.jobs[i].spec);
        json_end_object(&w);
      }
      json_end_array(&w);
      json_finish(&w);
    } else {
      for (size_t i = 0; i < plan.count; i++)
        printf("%s %s\n", plan.jobs[i].arch, plan.jobs[i].spec);
    }
    rc = 0;
    goto out;
  }

  state.opt = &o;
  state.plan = &plan;
  state.failures = calloc(plan.count ? plan.count : 1, sizeof *state.failures);
  if (!state.failures) goto oom;
  if (o.json) {
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    json_string(&w, "cache_dir", info.cache_dir);
    json_begin_array(&w, "archs");
    for (size_t i = 0; i < o.archs.count; i++) json_string(&w, NULL, o.archs.items[i]);
    json_end_array(&w);
    json_uint(&w, "specs", o.specs.count);
    json_begin_array(&w, "items");
    state.json = &w;
  } else if (!o.quiet) {
    printf("prewarming %zu spec%s x %zu arch%s (%zu kernels) into %s\n", o.specs.count,
           o.specs.count == 1 ? "" : "s", o.archs.count, o.archs.count == 1 ? "" : "s",
           plan.count, info.cache_dir);
    fflush(stdout);
  }

  double t0 = wall_clock_ms();
  prewarm_run_plan(&plan, on_result, &state);
  state.summary.wall_ms = wall_clock_ms() - t0;

  if (o.json) {
    json_end_array(&w);
    prewarm_json_summary(&w, "summary", &state.summary);
    json_end_object(&w);
    json_finish(&w);
  } else {
    prewarm_print_summary(stdout, &state.summary);
  }
  if (state.summary.failed) {
    fprintf(stderr, "ckjit-prewarm: %zu of %zu failed:\n", state.summary.failed, plan.count);
    for (size_t i = 0; i < plan.count; i++)
      if (state.failures[i][0])
        fprintf(stderr, "  %s %s: %s\n", plan.jobs[i].arch, plan.jobs[i].spec,
                state.failures[i]);
    if (!o.verbose && !o.json)
      fprintf(stderr, "  (-v prints the complete errors)\n");
  }
  rc = state.summary.failed ? 1 : 0;
  goto out;

oom:
  fprintf(stderr, "ckjit-prewarm: out of memory\n");
  rc = 1;
out:
  free(state.failures);
  prewarm_plan_free(&plan);
  str_list_free(&o.specs);
  str_list_free(&o.archs);
  ckjit_shutdown();
  return rc;
}
