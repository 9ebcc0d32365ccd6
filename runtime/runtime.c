/* Lazy, thread-safe initialization from options and environment, the
 * GPUs (each opened on first use), ckjit_init and ckjit_shutdown. */
#include "../base/buffer.h"
#include "runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_table.h"
#include "../cache/settings.h"
#include "code_cache.h"
#include "../base/error.h"
#include "../base/log.h"
#include "../base/stats.h"

static ckjit_runtime runtime;
static _Atomic int initialized; /* acquire-read on the hot path */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER; /* opening a GPU after init */

void ckjit_options_init(ckjit_options *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
  opts->backend = CKJIT_BACKEND_AUTO;
  opts->device = -1;
  opts->disk_cache = -1;
}

static int env_flag(const char *name) {
  const char *v = getenv(name);
  return v && *v && strcmp(v, "0") && strcmp(v, "false") && strcmp(v, "no") && strcmp(v, "off");
}

static ckjit_status open_device(ckjit_backend want, int ordinal, ckjit_device *out) {
  ckjit_status st = CKJIT_ERROR_NO_DEVICE;
  if (want != CKJIT_BACKEND_HIP) {
    st = ckjit__cuda_device_open(ordinal, out);
    if (st == CKJIT_SUCCESS || want == CKJIT_BACKEND_CUDA) return st;
  }
  char cuda_reason[256];
  ckjit__copy_str(cuda_reason, sizeof cuda_reason, ckjit__error_latest());
  st = ckjit__hip_device_open(ordinal, out);
  if (st && want == CKJIT_BACKEND_AUTO) {
    char hip_reason[256];
    ckjit__copy_str(hip_reason, sizeof hip_reason, ckjit__error_latest());
    return ckjit__fail(st == CKJIT_ERROR_INVALID_ARGUMENT ? st : CKJIT_ERROR_NO_DEVICE,
                       "no GPU found (CUDA: %s; HIP: %s)", cuda_reason, hip_reason);
  }
  return st;
}

/* Wraps an opened device as a GPU of the runtime and publishes it. */
static ckjit_status add_gpu(ckjit_runtime *rt, const ckjit_device *device, ckjit_gpu **out) {
  ckjit_gpu *gpu = aligned_alloc(alignof(ckjit_gpu), sizeof *gpu);
  if (!gpu) return ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "out of memory opening a GPU");
  memset(gpu, 0, sizeof *gpu);
  gpu->device = *device;
  ckjit__copy_str(gpu->arch, sizeof gpu->arch, rt->arch_forced ? rt->arch : device->arch);
  ckjit__memcache_init(&gpu->kernels);
  atomic_init(&gpu->memory_hits, 0);
  if (rt->arch_forced && !ckjit__arch_compatible(rt->arch, device->arch))
    CKJIT_WARN("CKJIT_ARCH=%s differs from %s's arch %s: kernels can be compiled but not launched "
               "there", rt->arch, device->name, device->arch);
  atomic_store_explicit(&rt->gpus[device->ordinal], gpu, memory_order_release);
  *out = gpu;
  return CKJIT_SUCCESS;
}

static ckjit_status initialize(const ckjit_options *opts) {
  static uint64_t generations; /* under init_lock */
  ckjit_runtime *rt = &runtime;
  memset(rt, 0, sizeof *rt);
  rt->generation = ++generations;

  ckjit_backend want = opts->backend;
  const char *env = getenv("CKJIT_BACKEND");
  if (want == CKJIT_BACKEND_AUTO && env && *env) {
    if (!strcmp(env, "cuda")) want = CKJIT_BACKEND_CUDA;
    else if (!strcmp(env, "hip")) want = CKJIT_BACKEND_HIP;
    else if (strcmp(env, "auto"))
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "CKJIT_BACKEND=%s: expected cuda, hip or auto",
                         env);
  }
  if (want != CKJIT_BACKEND_AUTO && want != CKJIT_BACKEND_CUDA && want != CKJIT_BACKEND_HIP)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "options.backend=%d is not a backend", (int)want);

  int ordinal = opts->device;
  if (ordinal < 0 && (env = getenv("CKJIT_DEVICE")) && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end || v < 0 || v > 1024)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "CKJIT_DEVICE=%s is not a device ordinal", env);
    ordinal = (int)v;
  }
  if (ordinal < 0) ordinal = 0;

  /* Every check that can fail comes before the device is opened, so a
   * failed initialization holds no device context. */
  const char *arch = opts->arch;
  if (!arch || !*arch) arch = getenv("CKJIT_ARCH");
  if (arch && *arch && ckjit__arch_vendor(arch) == CKJIT_BACKEND_AUTO)
    return ckjit__arch_validate(arch, 0, 0); /* sets the message */

  if (ordinal >= CKJIT_MAX_DEVICES)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "device %d: ckjit serves devices 0 to %d",
                       ordinal, CKJIT_MAX_DEVICES - 1);
  /* ckjit_options.remote_cache (a malformed URL fails the init, its password
   * redacted); NULL leaves CKJIT_REMOTE_CACHE to the disk cache's settings. */
  ckjit_remote_config remote_option;
  if (opts->remote_cache) {
    ckjit_status rs = ckjit__remote_config_url(&remote_option, opts->remote_cache,
                                               "ckjit_options.remote_cache");
    if (rs != CKJIT_SUCCESS) return rs;
  }
  rt->default_ordinal = ordinal;
  ckjit_device device;
  ckjit_status st = open_device(want, ordinal, &device);
  rt->has_device = st == CKJIT_SUCCESS;
  if (!rt->has_device) {
    if (st == CKJIT_ERROR_INVALID_ARGUMENT) return st;
    rt->device_status = st;
    ckjit__copy_str(rt->device_error, sizeof rt->device_error, ckjit__error_latest());
    CKJIT_INFO("no usable GPU (%s); compile-only mode", rt->device_error);
  }

  char canonical_arch[CKJIT_ARCH_MAX]; /* records and device info show the one spelling */
  rt->arch_forced = arch && *arch;
  if (rt->arch_forced)
    ckjit__copy_str(rt->arch, sizeof rt->arch, ckjit__arch_canonical(arch, canonical_arch));
  else if (rt->has_device) ckjit__copy_str(rt->arch, sizeof rt->arch, device.arch);
  rt->backend = rt->arch[0] ? ckjit__arch_vendor(rt->arch) : want;
  if (rt->has_device) {
    rt->device_count = device.device_count < CKJIT_MAX_DEVICES ? device.device_count : CKJIT_MAX_DEVICES;
    ckjit_gpu *gpu;
    if ((st = add_gpu(rt, &device, &gpu))) {
      device.close(&device);
      return st;
    }
  }

  /* Identify the compiler now (file lookups, no loading) so that the first
   * op call, served from the disk cache, does not pay for it. */
  const ckjit_compiler *compiler;
  if (rt->backend == CKJIT_BACKEND_CUDA || rt->backend == CKJIT_BACKEND_HIP) {
    int quiet = ckjit__error_quiet(1); /* a missing compiler fails later, with its message */
    (void)ckjit__compiler_get(rt->backend, &compiler);
    ckjit__error_quiet(quiet);
  }

  int disk = opts->disk_cache;
  if (disk < 0) disk = !env_flag("CKJIT_CACHE_DISABLE");
  rt->disk_requested = disk != 0;
  if (disk) {
    char dir[CKJIT_PATH_MAX];
    int quiet = ckjit__error_quiet(1); /* a warning, not this call's failure */
    int no_dir = ckjit__disk_default_dir(opts->cache_dir, dir, sizeof dir);
    if (no_dir) CKJIT_WARN("%s; using the in-memory cache only", ckjit__error_latest());
    ckjit__error_quiet(quiet);
    if (!no_dir) {
      ckjit__disk_open(&rt->disk, dir);
    }
    /* CKJIT_CACHE_MAX_SIZE, CKJIT_CACHE_MAX_ENTRIES, CKJIT_CACHE_PATH layers */
    ckjit__disk_configure_env(&rt->disk);
    if (opts->remote_cache) rt->disk.remote = remote_option;
    rt->disk_enabled = rt->disk.usable || rt->disk.n_layers > 0;
  }
  if ((env = getenv("CKJIT_DUMP_DIR")) && *env)
    ckjit__copy_str(rt->dump_dir, sizeof rt->dump_dir, env);
  /* An op runs on its stream's GPU.  With one GPU every stream is its (a
   * stream of another context fails in the driver, and the launch failure
   * is explained then: ckjit__kernel_launch), so only the default stream's
   * context is looked at; with more, each stream's owner is asked
   * (cuStreamGetCtx).  Operands' devices are asked only on request: one
   * driver query per pointer per call (bench/NOTES.md has its cost). */
  if ((env = getenv("CKJIT_DEVICE_CHECKS")) && *env) {
    if (!strcmp(env, "1")) rt->check_pointers = 1;
    else if (strcmp(env, "0"))
      CKJIT_WARN("CKJIT_DEVICE_CHECKS=%s: expected 0 or 1; using 0", env);
  }
  rt->ask_streams = rt->device_count > 1 || rt->check_pointers;
  return CKJIT_SUCCESS;
}

ckjit_status ckjit_init(const ckjit_options *opts) {
  ckjit_options defaults;
  ckjit_options_init(&defaults);
  if (opts) {
    if (opts->struct_size < sizeof(size_t) || opts->struct_size > sizeof defaults)
      return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "ckjit_init: options.struct_size=%zu (call ckjit_options_init first)",
                         opts->struct_size);
    memcpy(&defaults, opts, opts->struct_size);
  }
  pthread_mutex_lock(&init_lock);
  ckjit_status st;
  if (atomic_load(&initialized)) {
    st = ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                     "ckjit_init: already initialized (ops initialize lazily; call ckjit_shutdown "
                     "before initializing again)");
  } else if ((st = initialize(&defaults)) == CKJIT_SUCCESS) {
    atomic_store_explicit(&initialized, 1, memory_order_release);
  }
  pthread_mutex_unlock(&init_lock);
  return st;
}

ckjit_status ckjit__runtime_get(ckjit_runtime **out) {
  if (!atomic_load_explicit(&initialized, memory_order_acquire)) {
    pthread_mutex_lock(&init_lock);
    ckjit_status st = CKJIT_SUCCESS;
    if (!atomic_load(&initialized)) {
      ckjit_options defaults;
      ckjit_options_init(&defaults);
      if ((st = initialize(&defaults)) == CKJIT_SUCCESS)
        atomic_store_explicit(&initialized, 1, memory_order_release);
    }
    pthread_mutex_unlock(&init_lock);
    if (st) return st;
  }
  *out = &runtime;
  return CKJIT_SUCCESS;
}

ckjit_runtime *ckjit__runtime_if_ready(void) {
  return atomic_load_explicit(&initialized, memory_order_acquire) ? &runtime : NULL;
}

ckjit_status ckjit__runtime_device(ckjit_runtime **out) {
  ckjit_status st = ckjit__runtime_get(out);
  if (st) return st;
  if (!(*out)->has_device)
    return ckjit__fail((*out)->device_status ? (*out)->device_status : CKJIT_ERROR_NO_DEVICE,
                       "%s", (*out)->device_error);
  return CKJIT_SUCCESS;
}

ckjit_status ckjit__runtime_gpu(ckjit_runtime *rt, int ordinal, ckjit_gpu **out) {
  if (ordinal < 0 || ordinal >= rt->device_count)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "device %d requested but only %d present",
                       ordinal, rt->device_count);
  if ((*out = atomic_load_explicit(&rt->gpus[ordinal], memory_order_acquire))) return CKJIT_SUCCESS;
  pthread_mutex_lock(&open_lock);
  ckjit_status st = CKJIT_SUCCESS;
  if (!(*out = atomic_load_explicit(&rt->gpus[ordinal], memory_order_acquire))) {
    ckjit_device device;
    const ckjit_gpu *first = atomic_load(&rt->gpus[rt->default_ordinal]);
    if (!(st = open_device(first->device.vendor, ordinal, &device)) &&
        (st = add_gpu(rt, &device, out)))
      device.close(&device);
  }
  pthread_mutex_unlock(&open_lock);
  return st;
}

ckjit_status ckjit__runtime_gpu_of_context(ckjit_runtime *rt, void *context, const void *stream,
                                           int any_context, ckjit_gpu **out) {
  const ckjit_device *any = &atomic_load(&rt->gpus[rt->default_ordinal])->device;
  int ordinal = -1, primary = 0;
  ckjit_status st = any->context_device(context, &ordinal, &primary);
  if (st) return st;
  if (!primary && !any_context) {
    char which[200];
    any->describe(ordinal, which, sizeof which);
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "stream %p%s belongs to a context of %s that is not its primary context; "
                       "ckjit loads its kernels into each device's primary context (the one the "
                       "CUDA runtime, PyTorch and CuPy use)",
                       stream, (uintptr_t)stream <= 2 ? " (the default stream of the current context)" : "",
                       which);
  }
  return ckjit__runtime_gpu(rt, ordinal, out);
}

static void unload_kernel(ckjit_kernel *k, void *gpu) {
  const ckjit_device *d = &((ckjit_gpu *)gpu)->device;
  if (k->module) d->module_unload(d, k->module);
}

void ckjit_shutdown(void) {
  pthread_mutex_lock(&init_lock);
  if (atomic_load(&initialized)) {
    for (int i = 0; i < CKJIT_MAX_DEVICES; i++) {
      ckjit_gpu *gpu = atomic_exchange(&runtime.gpus[i], NULL);
      if (!gpu) continue;
      /* Counted on, as the process-wide counters are across a shutdown. */
      ckjit__stat_add(CKJIT_STAT_RETIRED_MEMORY_HITS, atomic_load(&gpu->memory_hits));
      ckjit__memcache_clear(&gpu->kernels, unload_kernel, gpu);
      pthread_mutex_destroy(&gpu->kernels.insert_lock);
      gpu->device.close(&gpu->device);
      free(gpu);
    }
    ckjit__code_cache_clear();
    atomic_store(&initialized, 0);
    memset(&runtime, 0, sizeof runtime);
  }
  pthread_mutex_unlock(&init_lock);
}
