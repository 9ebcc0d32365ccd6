/*
 * bench_ckjit's shared pieces: the run's state, error reporting and the
 * sections that live in their own files (bench_ckjit_bandwidth.c,
 * bench_ckjit_launch.c; bench_ckjit.c has main, the child processes and the
 * first-call and cold-compile sections).
 */
#ifndef CKJIT_BENCH_CKJIT_H
#define CKJIT_BENCH_CKJIT_H

#define BENCH_NAME "bench_ckjit"
#include "bench_util.h"

extern int g_status; /* exit status at the end: 1 error, 2 check failed */
extern int g_quick;

typedef struct bench {
  CUstream stream;
  ckjit_device_info info;
  char cache_dir[256];
} bench;

void report_ckjit(ckjit_status st, const char *what, const char *file, int line);
void report_cuda(CUresult r, const char *what, const char *file, int line);
void emit_note(const char *section, const char *text);

/* CU() (bench_util.h): print the CUDA error and exit 1. */
BENCH_UNUSED static void bench_cuda_fail(CUresult r, const char *what, const char *file, int line) {
  report_cuda(r, what, file, line);
  exit(1);
}

/* Fatal check: print the error and exit 1. */
#define CK(call)                                                         \
  do {                                                                   \
    ckjit_status st_ = (call);                                           \
    if (st_ != CKJIT_SUCCESS) {                                          \
      report_ckjit(st_, #call, __FILE__, __LINE__);                      \
      exit(1);                                                           \
    }                                                                    \
  } while (0)
/* Soft check for ckjit errors (they leave the CUDA context usable): print,
 * remember the failure and return -1 from the enclosing function. */
#define CK_SOFT(call)                                                    \
  do {                                                                   \
    ckjit_status st_ = (call);                                           \
    if (st_ != CKJIT_SUCCESS) {                                          \
      report_ckjit(st_, #call, __FILE__, __LINE__);                      \
      g_status = 1;                                                      \
      return -1;                                                         \
    }                                                                    \
  } while (0)

/* Sections in their own files. */
int section_bandwidth(bench *bn); /* bench_ckjit_bandwidth.c */
int section_launch(bench *bn);    /* bench_ckjit_launch.c */

#endif
