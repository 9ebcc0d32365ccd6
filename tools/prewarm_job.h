/* Prewarm jobs: one (spec, arch) pair compiled into the disk cache with
 * ckjit_compile_spec, its result, and how results are reported.
 *
 * A result is a flat, fixed-size struct so that a later worker model (-j N:
 * jobs run in child processes) can send it back to the parent over a pipe
 * unchanged; prewarm_run_plan() is the one place that decides where jobs
 * run and reports each result through a callback as it completes. */
#ifndef CKJIT_TOOLS_PREWARM_JOB_H
#define CKJIT_TOOLS_PREWARM_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json_writer.h"
#include "str_list.h"

typedef struct prewarm_job {
  const char *spec; /* "family:key=value,..." (borrowed) */
  const char *arch; /* "sm_90", "gfx90a", ... (borrowed) */
} prewarm_job;

typedef struct prewarm_result {
  int status;         /* ckjit_status */
  int cached;         /* 1: the entry was already in the disk cache */
  double ms;          /* wall time of the request */
  uint64_t code_size; /* bytes of the code object */
  char key[33];       /* cache key (32 hex digits) */
  char kernel[64];    /* kernel function name */
  char error[4096];   /* ckjit_last_error() on failure (truncated) */
} prewarm_result;

typedef struct prewarm_plan {
  prewarm_job *jobs;
  size_t count;
} prewarm_plan;

typedef struct prewarm_summary {
  size_t total, compiled, cached, failed;
  double compile_ms; /* summed over the items that compiled */
  double wall_ms;    /* of the whole run; set by the caller */
} prewarm_summary;

/* Every (spec, arch) pair, arch-major.  Returns 0, or -1 out of memory. */
int prewarm_plan_build(prewarm_plan *plan, const str_list *specs, const str_list *archs);
void prewarm_plan_free(prewarm_plan *plan);

/* Appends every default spec (ckjit_default_spec) to `specs`.  Returns 0, or
 * -1 with a message on stderr. */
int prewarm_add_default_specs(str_list *specs);

/* Runs one job in this process. */
void prewarm_run_job(const prewarm_job *job, prewarm_result *out);

typedef void (*prewarm_on_result)(void *ctx, size_t index, const prewarm_result *result);

/* Runs every job of `plan` (serially, in this process) and calls `on_result`
 * once per job as it completes, with the job's index in the plan. */
void prewarm_run_plan(const prewarm_plan *plan, prewarm_on_result on_result, void *ctx);

void prewarm_summary_add(prewarm_summary *s, const prewarm_result *r);

/* The first line of the result's error ("" when none) into buf. */
void prewarm_error_first_line(const prewarm_result *r, char *buf, size_t len);

/* "[ 3/40] compiled sm_90   elementwise:...  key ... 12.3 ms" (one line). */
void prewarm_print_line(FILE *out, size_t index, size_t total, const prewarm_job *job,
                        const prewarm_result *r, int verbose);
/* Summary lines: counts and wall time, or "nothing to compile". */
void prewarm_print_summary(FILE *out, const prewarm_summary *s);

/* One result as a JSON object (in an array). */
void prewarm_json_result(json_writer *w, const prewarm_job *job, const prewarm_result *r);
/* The summary as a JSON object member named `key`. */
void prewarm_json_summary(json_writer *w, const char *key, const prewarm_summary *s);

#endif
