/* Prewarm worker processes: ckjit-prewarm -j N.
 *
 * The parent never compiles.  It starts each worker by fork + exec of its
 * own executable in the hidden `--worker` mode (so no compiler library,
 * CUDA or HIP state is ever inherited across a fork), hands out one job at
 * a time over a pipe and reads back a fixed-size result over another:
 *
 *   parent -> worker (worker's stdin):  pool_job_msg     (fixed size)
 *   worker -> parent (worker's stdout): pool_result_msg  (fixed size)
 *
 * The worker points its own stdout at stderr before anything else runs, so
 * whatever a compiler prints cannot corrupt the result stream.  One job per
 * worker at a time keeps the load balanced and tells the parent exactly
 * which job a worker was running when it died: a worker killed by a signal
 * (a compiler crash) or that runs past the time limit (it is then killed
 * with SIGKILL) fails that job only, naming the signal or the limit; a
 * fresh worker replaces it and the run goes on.  A worker that finds its
 * stdin closed (the parent is gone or done) exits; on Linux a worker also
 * dies with its parent (PR_SET_PDEATHSIG). */
#ifndef CKJIT_TOOLS_WORKER_POOL_H
#define CKJIT_TOOLS_WORKER_POOL_H

#include <stddef.h>

#include "prewarm_job.h"

/* The worker-mode flag (argv[1]).  Not a documented option. */
#define POOL_WORKER_FLAG "--worker"

/* Longest arch / spec text a job message carries. */
#define POOL_ARCH_MAX 128
#define POOL_SPEC_MAX 1024

typedef struct pool_options {
  int workers;          /* processes to run at once (>= 1; capped at the job count) */
  double timeout_s;     /* per job; <= 0: no limit */
  const char *exe;      /* executable to start in worker mode */
  const char *cache_dir;/* passed to the workers (--cache-dir) */
  /* Called about every 250 ms while jobs run (progress display); may be NULL. */
  void (*on_tick)(void *ctx);
} pool_options;

typedef struct pool_stats {
  size_t started;  /* worker processes started */
  size_t replaced; /* of those, replacements for crashed or killed ones */
  size_t max_live; /* most workers alive at once */
} pool_stats;

/* Runs every job of `plan` in worker processes and calls `on_result` once
 * per job, in completion order, with the job's index.  Returns 0, or -1
 * when no worker could be started at all (every job is then reported as
 * failed with the reason). */
int prewarm_pool_run(const prewarm_plan *plan, const pool_options *opt, prewarm_on_result on_result,
                     void *ctx, pool_stats *stats);

/* The worker's main loop: initializes ckjit with `cache_dir` (NULL: the
 * default) and answers jobs on stdin until it is closed.  Returns the
 * process exit status.
 *
 * Test hooks, honored only here (in worker mode): when the environment
 * variable CKJIT_PREWARM_TEST_CRASH is set and non-empty, a job whose spec
 * contains its value raises SIGSEGV; CKJIT_PREWARM_TEST_HANG likewise makes
 * the job sleep forever (for the time limit). */
int prewarm_worker_main(const char *cache_dir);

/* The path of the running executable (/proc/self/exe), or `argv0` when it
 * cannot be read.  Returns a malloc'ed string or NULL. */
char *pool_self_exe(const char *argv0);

#endif
