/* ckjit-prewarm: compile kernel specializations into the disk cache ahead of
 * time, so that the first op call at run time loads instead of compiling.
 *
 *   ckjit-prewarm [options] (SPEC... | --all | --manifest FILE)
 *
 * No GPU is needed.  The (spec, arch) pairs are compiled by worker
 * processes (tools/worker_pool.h): the parent only plans, hands out jobs and
 * reports, so a compiler crash or hang fails its own item and the run goes
 * on.  A bad spec, arch or manifest line fails only its own items. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cache/disk_cache.h"
#include "cache/remote.h"
#include "cache/remote_redis.h"
#include "ckjit/ckjit.h"
#include "json_writer.h"
#include "manifest.h"
#include "prewarm_job.h"
#include "prewarm_plan.h"
#include "runtime/arch.h"
#include "runtime/spec.h"
#include "str_list.h"
#include "wall_clock.h"
#include "worker_pool.h"

#define DEFAULT_TIMEOUT_S 300.0
#define MAX_JOBS 1024

static void usage(FILE *out) {
  fputs(
      "usage: ckjit-prewarm [options] SPEC...\n"
      "       ckjit-prewarm [options] --all\n"
      "       ckjit-prewarm [options] --manifest FILE\n"
      "\n"
      "Compiles kernel specializations into the ckjit disk cache ahead of time\n"
      "(no GPU needed), in parallel worker processes.  A SPEC is\n"
      "\"family:key=value,...\"; omitted keys take their defaults, e.g.\n"
      "  elementwise:dtype=bf16,op=gelu_tanh\n"
      "  transpose:dtype=f32\n"
      "SPECs, --all and --manifest can be combined; a pair given twice compiles once.\n"
      "\n"
      "options:\n"
      "  --all             every default specialization (ckjit_default_spec)\n"
      "  --manifest FILE   the specializations listed in FILE ('-': stdin), e.g. one\n"
      "                    written by an application run with CKJIT_RECORD=FILE.\n"
      "                    Lines: 'ckjit-spec 1 ARCH SPEC', 'ARCH SPEC' or 'SPEC';\n"
      "                    '#' comments.  A line's own ARCH is used for it; other\n"
      "                    lines get the --arch list.  May be repeated.\n"
      "  --arch LIST       comma-separated target archs, both vendors allowed,\n"
      "                    e.g. gfx90a,gfx1030,sm_90 (default: the configured arch:\n"
      "                    CKJIT_ARCH or the GPU's)\n"
      "  -j, --jobs N      worker processes (default: the number of online CPUs)\n"
      "  --timeout SEC     time limit per kernel; the worker is killed past it and\n"
      "                    the item fails (default 300; 0: none)\n"
      "  --cache-dir DIR   cache directory (default: CKJIT_CACHE_DIR,\n"
      "                    XDG_CACHE_HOME/ckjit, ~/.cache/ckjit); the disk cache is\n"
      "                    always on for prewarm\n"
      "  --remote URL      compile with the remote cache on (CKJIT_REMOTE_CACHE=URL\n"
      "                    for the workers): redis://[user[:password]@]host[:port][/db]\n"
      "                    or unix:///path/to.sock.  A kernel another process stored\n"
      "                    there is fetched instead of compiled; one compiled here is\n"
      "                    stored there.  Kernels already in the local cache are not\n"
      "                    sent: 'ckjit-cache push --remote URL' copies those.  The\n"
      "                    server must answer at the start (exit 1 otherwise)\n"
      "  --json            machine-readable output on stdout (no progress lines)\n"
      "  -q, --quiet       print only failures and the summary (no progress bar)\n"
      "  -v, --verbose     print the complete error (compiler log) of failures\n"
      "  --list            print the (arch, spec) pairs and exit without compiling\n"
      "  -h, --help        this help\n"
      "\n"
      "On a terminal a progress bar is drawn on stderr; otherwise one line per\n"
      "kernel is printed.  The summary gives the kernels compiled, already cached\n"
      "and failed, the wall time and the number of workers.\n"
      "\n"
      "Exit status: 0 when every item compiled or was cached, 1 when any failed,\n"
      "2 on a usage error.  An item whose entry could not be stored in the cache\n"
      "(a full or read-only disk, something else at the entry's path) fails with\n"
      "the reason, so a second run of a successful one compiles nothing.\n",
      out);
}

/* ---- reporting ----------------------------------------------------------- */

static int term_width(void) {
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
  return 80;
}

static void bar_clear(run_state *s) {
  if (!s->bar_drawn) return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
  s->bar_drawn = 0;
}

static void bar_draw(run_state *s) {
  if (!s->bar) return;
  char text[160];
  snprintf(text, sizeof text, " %zu/%zu  compiled %zu  cached %zu  failed %zu  %zu worker%s  %.1f s",
           s->done, s->total, s->summary.compiled, s->summary.cached, s->summary.failed,
           s->workers, s->workers == 1 ? "" : "s", (wall_clock_ms() - s->t0) / 1e3);
  /* A fixed width, so the bar does not jump as the counts grow. */
  int width = term_width() - 72;
  if (width > 40) width = 40;
  if (width < 10) width = 10;
  int filled = s->total ? (int)((double)width * (double)s->done / (double)s->total) : width;
  char bar[64];
  for (int i = 0; i < width; i++) bar[i] = i < filled ? '#' : '.';
  bar[width] = '\0';
  fprintf(stderr, "\r[%s]%s\033[K", bar, text);
  fflush(stderr);
  s->bar_drawn = 1;
}

static void on_tick(void *ctx) { bar_draw(ctx); }

static void report(run_state *s, const prewarm_job *job, const prewarm_result *r) {
  prewarm_summary_add(&s->summary, r);
  s->done++;
  if (r->status != CKJIT_SUCCESS) {
    char first[300], line[800];
    prewarm_error_first_line(r, first, sizeof first);
    snprintf(line, sizeof line, "%s %s: %s%s%s: %s", job->arch[0] ? job->arch : "-", job->spec,
             job->origin ? job->origin : "", job->origin ? ": " : "",
             ckjit_status_string((ckjit_status)r->status), first);
    str_list_add_unique(&s->failure_lines, line);
  }
  if (s->listing) {
    return;
  } else if (s->json) {
    prewarm_json_result(s->json, job, r);
  } else if (r->status != CKJIT_SUCCESS || (!s->opt->quiet && s->item_lines)) {
    /* The counter shows completions, so it stays monotonic with workers. */
    bar_clear(s);
    prewarm_print_line(stdout, s->done - 1, s->total, job, r, s->opt->verbose);
    fflush(stdout);
  }
  bar_draw(s);
}

static void on_result(void *ctx, size_t index, const prewarm_result *r) {
  run_state *s = ctx;
  report(s, &s->plan.jobs[index], r);
}

/* ---- arguments ----------------------------------------------------------- */

/* The value of option `name` given as "--name VALUE" or "--name=VALUE" (or
 * "-jN" for short options); NULL when `a` is not that option. */
static const char *option_value(int argc, char **argv, int *i, const char *name, int *missing) {
  const char *a = argv[*i];
  size_t n = strlen(name);
  if (strncmp(a, name, n)) return NULL;
  if (a[n] == '=' && name[1] == '-') return a + n + 1;
  if (a[n] != '\0') return name[1] == '-' ? NULL : a + n; /* -j4 */
  if (*i + 1 < argc) return argv[++*i];
  *missing = 1;
  return NULL;
}

static int parse_args(int argc, char **argv, options *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v;
    int missing = 0;
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
    } else if ((v = option_value(argc, argv, &i, "--arch", &missing)) || missing) {
      if (missing) {
        fprintf(stderr, "ckjit-prewarm: --arch needs a list, e.g. --arch sm_90,gfx90a\n");
        return -1;
      }
      int n = str_list_add_csv(&o->archs, v);
      if (n < 0) goto oom;
      if (n == 0) {
        fprintf(stderr, "ckjit-prewarm: --arch '%s' names no arch\n", v);
        return -1;
      }
    } else if ((v = option_value(argc, argv, &i, "--cache-dir", &missing)) || missing) {
      if (missing || !*v) {
        fprintf(stderr, "ckjit-prewarm: --cache-dir needs a directory\n");
        return -1;
      }
      o->cache_dir = v;
    } else if ((v = option_value(argc, argv, &i, "--remote", &missing)) || missing) {
      if (missing || !*v) {
        fprintf(stderr, "ckjit-prewarm: --remote needs a URL (redis://host[:port][/db] or "
                        "unix:///path/to.sock)\n");
        return -1;
      }
      o->remote = v;
    } else if ((v = option_value(argc, argv, &i, "--manifest", &missing)) || missing) {
      if (missing || !*v) {
        fprintf(stderr, "ckjit-prewarm: --manifest needs a file ('-' for stdin)\n");
        return -1;
      }
      if (str_list_add_unique(&o->manifests, v) != 0) goto oom;
    } else if ((v = option_value(argc, argv, &i, "--jobs", &missing)) ||
               (!missing && (v = option_value(argc, argv, &i, "-j", &missing))) || missing) {
      char *end;
      long n = missing ? 0 : strtol(v, &end, 10);
      if (missing || !*v || *end || n < 1 || n > MAX_JOBS) {
        fprintf(stderr, "ckjit-prewarm: -j needs a number of workers from 1 to %d\n", MAX_JOBS);
        return -1;
      }
      o->jobs = (int)n;
    } else if ((v = option_value(argc, argv, &i, "--timeout", &missing)) || missing) {
      char *end;
      double t = missing ? -1 : strtod(v, &end);
      if (missing || !*v || *end || !(t >= 0) || t > 1e6) {
        fprintf(stderr, "ckjit-prewarm: --timeout needs seconds (0: no limit)\n");
        return -1;
      }
      o->timeout_s = t;
    } else if (strcmp(a, "--") == 0) {
      for (i++; i < argc; i++)
        if (str_list_add_unique(&o->specs, argv[i]) != 0) goto oom;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "ckjit-prewarm: unknown option '%s' (see --help)\n", a);
      return -1;
    } else if (str_list_add_unique(&o->specs, a) != 0) {
      goto oom;
    }
  }
  if (!o->all && o->specs.count == 0 && o->manifests.count == 0) {
    fprintf(stderr, "ckjit-prewarm: give specs to compile, --all or --manifest FILE (see --help)\n");
    return -1;
  }
  return 0;
oom:
  fprintf(stderr, "ckjit-prewarm: out of memory\n");
  return -1;
}

static int online_cpus(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > MAX_JOBS ? MAX_JOBS : (int)n;
}

/* ---- main ---------------------------------------------------------------- */

static int worker_mode(int argc, char **argv) {
  const char *cache_dir = NULL;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--cache-dir") == 0 && i + 1 < argc) cache_dir = argv[++i];
    else {
      fprintf(stderr, "ckjit-prewarm: %s is internal; unexpected '%s'\n", POOL_WORKER_FLAG, argv[i]);
      return 2;
    }
  }
  return prewarm_worker_main(cache_dir);
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], POOL_WORKER_FLAG) == 0) return worker_mode(argc, argv);

  options o;
  memset(&o, 0, sizeof o);
  o.jobs = 0;
  o.timeout_s = DEFAULT_TIMEOUT_S;
  if (parse_args(argc, argv, &o) != 0) return 2;
  if (o.jobs == 0) o.jobs = online_cpus();

  int rc = 1;
  run_state s;
  memset(&s, 0, sizeof s);
  s.opt = &o;
  planner pl;
  memset(&pl, 0, sizeof pl);
  char *exe = NULL;
  json_writer w;

  /* The parent never compiles: with the archs given (--arch or CKJIT_ARCH)
   * it needs no GPU either, so it does not open one (the workers never do). */
  const char *env_arch = getenv("CKJIT_ARCH");
  if (o.archs.count || (env_arch && *env_arch)) {
    setenv("CUDA_VISIBLE_DEVICES", "-1", 1);
    setenv("HIP_VISIBLE_DEVICES", "-1", 1);
  }
  /* --remote: the workers compile with the remote tier on (they inherit the
   * environment); the server must answer now, or nothing would reach it. */
  if (o.remote && !o.list) {
    ckjit_remote_config remote;
    ckjit_status rs = ckjit__remote_config_url(&remote, o.remote, "--remote");
    if (rs != CKJIT_SUCCESS) {
      fprintf(stderr, "ckjit-prewarm: %s\n", ckjit_last_error());
      rc = rs == CKJIT_ERROR_INVALID_ARGUMENT ? 2 : 1;
      goto out;
    }
    ckjit_redis *probe;
    char why[400];
    if (ckjit__redis_connect(&remote.url, remote.connect_timeout_ms, remote.timeout_ms, &probe, why,
                             sizeof why) != CKJIT_REDIS_OK) {
      fprintf(stderr, "ckjit-prewarm: cannot use the remote cache %s: %s\n", remote.url.display,
              why);
      goto out;
    }
    ckjit__redis_close(probe);
    setenv("CKJIT_REMOTE_CACHE", o.remote, 1);
  }
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
    char dir[CKJIT_PATH_MAX];
    if (ckjit__disk_default_dir(o.cache_dir, dir, sizeof dir) != 0) /* which setting, and why */
      fprintf(stderr, "ckjit-prewarm: %s; pass a writable --cache-dir\n", ckjit_last_error());
    else
      fprintf(stderr,
              "ckjit-prewarm: the disk cache is unusable%s%s (see the warning above); "
              "pass a writable --cache-dir\n",
              o.cache_dir ? ": " : "", o.cache_dir ? o.cache_dir : "");
    goto out;
  }

  /* The archs: --arch, else the configured one (CKJIT_ARCH or the GPU's). */
  pl.s = &s;
  for (size_t i = 0; i < o.archs.count; i++)
    if (plan_add_arch(&pl, o.archs.items[i]) != 0) goto oom;
  if (!o.archs.count && info.arch[0] && plan_add_arch(&pl, info.arch) != 0) goto oom;

  for (size_t i = 0; i < o.specs.count; i++)
    if (plan_spec(&pl, NULL, o.specs.items[i], NULL, 0) != 0) goto oom;
  if (o.all) {
    size_t n = ckjit_default_spec_count();
    for (size_t i = 0; i < n; i++) {
      char buf[CKJIT_SPEC_TEXT_MAX];
      if (ckjit_default_spec(i, buf, sizeof buf) != CKJIT_SUCCESS) {
        fprintf(stderr, "ckjit-prewarm: ckjit_default_spec(%zu) failed: %s\n", i,
                ckjit_last_error());
        goto out;
      }
      if (plan_spec(&pl, NULL, buf, NULL, 1) != 0) goto oom;
    }
  }
  for (size_t i = 0; i < o.manifests.count; i++)
    if (plan_manifest(&pl, o.manifests.items[i]) != 0) goto oom;
  if (pl.need_default_arch) {
    fprintf(stderr,
            "ckjit-prewarm: no target arch: there is no GPU and CKJIT_ARCH is not set;\n"
            "  pass --arch, e.g. --arch sm_90 or --arch gfx90a,gfx1030,sm_90\n");
    rc = 2;
    goto out;
  }
  s.total = s.plan.count + s.n_early;
  s.workers = (size_t)o.jobs < s.plan.count ? (size_t)o.jobs : s.plan.count;

  if (o.list) {
    s.listing = 1;
    for (size_t i = 0; i < s.n_early; i++) report(&s, &s.early[i].job, s.early[i].result);
    if (o.json) {
      json_init(&w, stdout);
      json_begin_array(&w, NULL);
      for (size_t i = 0; i < s.plan.count; i++) {
        json_begin_object(&w, NULL);
        json_string(&w, "arch", s.plan.jobs[i].arch);
        json_string(&w, "spec", s.plan.jobs[i].spec);
        if (s.plan.jobs[i].canonical) json_string(&w, "canonical", s.plan.jobs[i].canonical);
        json_end_object(&w);
      }
      json_end_array(&w);
      json_finish(&w);
    } else {
      for (size_t i = 0; i < s.plan.count; i++)
        printf("%s %s\n", s.plan.jobs[i].arch, s.plan.jobs[i].spec);
    }
    rc = s.summary.failed ? 1 : 0;
    goto failures;
  }

  s.bar = !o.quiet && isatty(STDERR_FILENO);
  s.item_lines = !s.bar || !isatty(STDOUT_FILENO);
  if (o.json) {
    json_init(&w, stdout);
    json_begin_object(&w, NULL);
    json_string(&w, "cache_dir", info.cache_dir);
    json_begin_array(&w, "archs");
    for (size_t i = 0; i < pl.valid_archs.count; i++) json_string(&w, NULL, pl.valid_archs.items[i]);
    json_end_array(&w);
    json_uint(&w, "jobs", s.plan.count);
    json_uint(&w, "workers", s.workers);
    json_begin_array(&w, "items");
    s.json = &w;
  } else if (!o.quiet) {
    printf("prewarming %zu kernel%s (%zu arch%s) into %s with %zu worker%s\n", s.plan.count,
           s.plan.count == 1 ? "" : "s", pl.valid_archs.count, pl.valid_archs.count == 1 ? "" : "s",
           info.cache_dir, s.workers, s.workers == 1 ? "" : "s");
    fflush(stdout);
  }

  s.t0 = wall_clock_ms();
  for (size_t i = 0; i < s.n_early; i++) report(&s, &s.early[i].job, s.early[i].result);
  pool_stats ps;
  memset(&ps, 0, sizeof ps);
  if (s.plan.count) {
    exe = pool_self_exe(argv[0]);
    if (!exe) goto oom;
    pool_options po = {o.jobs, o.timeout_s, exe, info.cache_dir, s.bar ? on_tick : NULL};
    prewarm_pool_run(&s.plan, &po, on_result, &s, &ps);
  }
  bar_clear(&s);
  s.bar = 0;
  s.summary.wall_ms = wall_clock_ms() - s.t0;
  s.summary.workers = s.workers;

  if (o.json) {
    json_end_array(&w);
    prewarm_json_summary(&w, "summary", &s.summary);
    json_uint(&w, "workers_started", ps.started);
    json_uint(&w, "workers_replaced", ps.replaced);
    json_end_object(&w);
    json_finish(&w);
  } else {
    prewarm_print_summary(stdout, &s.summary);
  }
  rc = s.summary.failed ? 1 : 0;
failures:
  fflush(stdout);
  if (s.failure_lines.count) {
    fprintf(stderr, "ckjit-prewarm: %zu of %zu failed:\n", s.summary.failed, s.total);
    for (size_t i = 0; i < s.failure_lines.count; i++)
      fprintf(stderr, "  %s\n", s.failure_lines.items[i]);
    if (!o.verbose && !o.json && !o.list) fprintf(stderr, "  (-v prints the complete errors)\n");
  }
  goto out;

oom:
  fprintf(stderr, "ckjit-prewarm: out of memory\n");
  rc = 1;
out:
  free(exe);
  for (size_t i = 0; i < s.n_early; i++) {
    free(s.early[i].result);
    free((char *)s.early[i].job.arch);
    free((char *)s.early[i].job.spec);
    free((char *)s.early[i].job.origin);
  }
  free(s.early);
  for (size_t i = 0; pl.arch_error && i < pl.archs.count; i++) free(pl.arch_error[i]);
  free(pl.arch_error);
  str_list_free(&pl.archs);
  prewarm_plan_free(&s.plan);
  str_list_free(&s.failure_lines);
  str_list_free(&pl.valid_archs);
  str_list_free(&o.specs);
  str_list_free(&o.archs);
  str_list_free(&o.manifests);
  ckjit_shutdown();
  return rc;
}
