/* Prewarm jobs: one (spec, arch) pair compiled into the disk cache with
 * ckjit_compile_spec, its result, and how results are reported.
 *
 * A result is a flat, fixed-size struct, so that worker processes
 * (tools/worker_pool.h, ckjit-prewarm -j N) send it back to the parent over
 * a pipe unchanged.  prewarm_run_plan() runs a plan in this process;
 * prewarm_pool_run() runs it in worker processes; both report each result
 * through a callback as it completes. */
#ifndef CKJIT_TOOLS_PREWARM_JOB_H
#define CKJIT_TOOLS_PREWARM_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json_writer.h"
#include "str_list.h"

typedef struct prewarm_job {
  const char *spec;      /* "family:key=value,..." as given (borrowed or owned by the plan) */
  const char *arch;      /* "sm_90", "gfx90a", ...; "" for an item that failed
                            before an arch applied (a malformed manifest line) */
  const char *origin;    /* "FILE:LINE" of a manifest line, or NULL */
  const char *canonical; /* the spec's canonical text (what is compiled), or NULL: spec */
} prewarm_job;

typedef struct prewarm_result {
  int status;         /* ckjit_status */
  int cached;         /* 1: the entry was already in the disk cache */
  double ms;          /* wall time of the request */
  uint64_t code_size; /* bytes of the code object */
  char key[33];       /* cache key (32 hex digits) */
  char kernel[64];    /* kernel function name */
  char error[4096];   /* ckjit_last_error() on failure (truncated) */
  int signal;         /* the signal that killed the worker running it, or 0 */
  int timed_out;      /* 1: killed after the per-job time limit */
  int stored;         /* 1: the entry is in the disk cache (ckjit_compile_result.stored) */
  int not_stored;     /* 1: built (key, code_size and kernel are set) but its entry is not in
                         the disk cache (CKJIT_ERROR_CACHE): a failure, as prewarm exists to
                         fill the cache */
} prewarm_result;

typedef struct prewarm_plan {
  prewarm_job *jobs;
  size_t count;
  size_t no_kernel; /* pairs left out: the spec has no kernel for that arch */
  /* Private to prewarm_plan_add: capacity, owned strings, and an
   * open-addressing index of (arch, spec) for duplicate detection. */
  size_t cap_;
  char **owned_;
  size_t n_owned_, cap_owned_;
  size_t *slots_; /* job index + 1, 0 = empty */
  size_t n_slots_;
} prewarm_plan;

typedef struct prewarm_summary {
  size_t total, compiled, cached, failed;
  size_t crashed, timed_out; /* failures of those kinds (counted in failed too) */
  size_t not_stored;         /* failures: built but not in the disk cache (in failed too) */
  size_t duplicates;         /* pairs given more than once, compiled once; set by the caller */
  size_t no_kernel;          /* default pairs skipped: no kernel for the arch; set by the caller */
  size_t workers;            /* worker processes used; 0: in this process; set by the caller */
  double compile_ms;         /* summed over the items that compiled */
  double wall_ms;            /* of the whole run; set by the caller */
} prewarm_summary;

/* Every (spec, arch) pair, arch-major (borrowing the strings), except the
 * pairs whose spec has no kernel for the arch (counted in no_kernel).
 * Returns 0, or -1 out of memory. */
int prewarm_plan_build(prewarm_plan *plan, const str_list *specs, const str_list *archs);

/* 1 when `spec` is well formed, `arch` is a CUDA or HIP arch name and the
 * spec's family has no kernel for it (ckjit_spec_has_kernel's refusal). */
int prewarm_no_kernel(const char *spec, const char *arch);

/* Appends the pair (arch, spec) with copies of the strings, unless a job
 * with the same arch and canonical spec is in the plan already.
 * `canonical` (NULL: `spec`) is what identifies and compiles the spec;
 * `origin` may be NULL.  Returns 1 when added, 0 for a duplicate, -1 out of
 * memory.  (Do not mix with prewarm_plan_build on one plan.) */
int prewarm_plan_add(prewarm_plan *plan, const char *arch, const char *spec,
                     const char *canonical, const char *origin);

/* The text a job compiles: its canonical spec, else the spec as given. */
static inline const char *prewarm_job_spec(const prewarm_job *job) {
  return job->canonical ? job->canonical : job->spec;
}

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
