/* Process-wide runtime state, initialized lazily and once, and the GPUs it
 * has opened: every GPU of the process, each on first use. */
#ifndef CKJIT_RUNTIME_RUNTIME_H
#define CKJIT_RUNTIME_RUNTIME_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

#include "arch.h"
#include "backend.h"
#include "kernel_table.h"
#include "../cache/disk_cache.h"

#define CKJIT_MAX_DEVICES 64

/* One GPU as ckjit uses it: the backend's device, the arch its kernels are
 * compiled for, and its own table of loaded kernels. */
typedef struct ckjit_gpu {
  ckjit_device device;
  char arch[CKJIT_ARCH_MAX]; /* CKJIT_ARCH when set, else the device's own */
  ckjit_kernel_table kernels;
  /* On a cache line of its own: threads driving different GPUs share no
   * counter on the hot path. */
  alignas(64) _Atomic uint64_t memory_hits;
} ckjit_gpu;

typedef struct ckjit_runtime {
  ckjit_backend backend;      /* vendor of `arch` */
  int has_device;             /* the default GPU is open */
  int default_ordinal;        /* CKJIT_DEVICE / options.device: the GPU of the default stream
                                 when no context is current */
  int device_count;           /* GPUs of the vendor the process sees */
  int check_pointers;         /* CKJIT_DEVICE_CHECKS=1: operands' devices are asked */
  int ask_streams;            /* each explicit stream's owner is asked (more than one GPU,
                                 or CKJIT_DEVICE_CHECKS=1) */
  ckjit_gpu *_Atomic gpus[CKJIT_MAX_DEVICES]; /* by ordinal, opened on first use */
  char arch[CKJIT_ARCH_MAX];  /* CKJIT_ARCH, else the default GPU's arch ("" without either) */
  int arch_forced;            /* `arch` came from CKJIT_ARCH / ckjit_options.arch */
  ckjit_status device_status; /* why there is no device (for the error message) */
  char device_error[512];
  ckjit_disk_cache disk;
  int disk_enabled;
  int disk_requested;            /* the disk cache was asked for (not turned off), usable or not */
  char dump_dir[CKJIT_PATH_MAX]; /* CKJIT_DUMP_DIR, "" when off */
  uint64_t generation;           /* of this initialization: never the same after a
                                    ckjit_shutdown (prepared calls check it) */
} ckjit_runtime;

/* The initialized runtime (lazy, thread-safe).  Never NULL on success. */
ckjit_status ckjit__runtime_get(ckjit_runtime **out);

/* The runtime when initialized, else NULL (initializes nothing). */
ckjit_runtime *ckjit__runtime_if_ready(void);

/* The runtime with a usable default GPU, or CKJIT_ERROR_NO_DEVICE (with the
 * reason) when there is none. */
ckjit_status ckjit__runtime_device(ckjit_runtime **out);

/* GPU `ordinal`, opened on first use (thread-safe; lock-free once open). */
ckjit_status ckjit__runtime_gpu(ckjit_runtime *rt, int ordinal, ckjit_gpu **out);

/* The GPU whose context is `context` (from ckjit_device.stream_context),
 * opening it on first use.  A context that is not a device's primary one
 * is that device with `any_context`, else CKJIT_ERROR_INVALID_ARGUMENT
 * (ckjit's kernels live in primary contexts).  `stream` is for the message. */
ckjit_status ckjit__runtime_gpu_of_context(ckjit_runtime *rt, void *context, const void *stream,
                                           int any_context, ckjit_gpu **out);

#endif
