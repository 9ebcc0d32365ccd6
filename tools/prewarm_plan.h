/* ckjit-prewarm's planning: the run's options and state, and the (spec,
 * arch) items made from the command line, --all and manifests.  A bad spec,
 * arch or manifest line becomes an early failure of its own items (it is
 * reported with the compiled ones); everything else goes into the plan
 * (prewarm_job.h) that the worker pool compiles. */
#pragma once
#include <stddef.h>

#include "ckjit/ckjit.h"
#include "json_writer.h"
#include "prewarm_job.h"
#include "str_list.h"

typedef struct options {
  str_list specs;     /* from the command line, in order */
  str_list archs;     /* --arch */
  str_list manifests; /* --manifest */
  const char *cache_dir;
  const char *remote; /* --remote URL */
  int all, json, quiet, verbose, list;
  int jobs;
  double timeout_s;
} options;

/* An item that failed while planning (bad spec, arch or manifest line). */
typedef struct early_failure {
  prewarm_job job; /* strings owned */
  prewarm_result *result;
} early_failure;

typedef struct run_state {
  const options *opt;
  prewarm_plan plan;
  early_failure *early;
  size_t n_early, cap_early;
  size_t total;   /* plan.count + n_early */
  size_t done;
  prewarm_summary summary;
  json_writer *json;
  str_list failure_lines; /* "arch spec: STATUS: first line" */
  /* progress display */
  int bar;        /* a progress bar on stderr */
  int bar_drawn;
  int item_lines; /* one line per item on stdout (else only failures) */
  int listing;    /* --list: failures go to the closing list on stderr only */
  size_t workers;
  double t0;
} run_state;

typedef struct planner {
  run_state *s;
  str_list archs;        /* --arch in order (valid or not), or the configured arch */
  char **arch_error;     /* per arch: why it is invalid, or NULL (as many as archs) */
  str_list valid_archs;  /* the archs without an error */
  int oom;
  int need_default_arch; /* a spec without an arch met an empty arch list */
} planner;

/* Records an item that failed while planning: arch, spec as given, origin
 * (manifest:line, or NULL for the command line), status and message.
 * Returns 0, or -1 out of memory. */
int plan_early_failure(run_state *s, const char *arch, const char *spec, const char *origin,
                       ckjit_status st, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Appends a target arch (unless listed already) and why it is invalid, if
 * it is.  Returns 0, or -1 out of memory. */
int plan_add_arch(planner *pl, const char *arch);

/* Adds `spec_text` for `arch`, or for every arch of the list (arch NULL);
 * `defaults`: a spec of --all (left out for an arch it has no kernel for).
 * Returns 0, or -1 out of memory. */
int plan_spec(planner *pl, const char *arch, const char *spec_text, const char *origin, int defaults);

/* Adds every line of a manifest file ("-": stdin); an unreadable file is an
 * early failure.  Returns 0, or -1 out of memory. */
int plan_manifest(planner *pl, const char *path);
