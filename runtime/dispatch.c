/* The op call path.  A repeated call costs one tuple hash, one lock-free
 * table lookup and the driver's launch; everything else happens once per
 * specialization, in build_kernel, by exactly one thread. */
#include "dispatch.h"

#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "../base/error.h"
#include "../base/log.h"
#include "record.h"
#include "../base/clock.h"
#include "../base/stats.h"

static ckjit_status build_kernel(ckjit_gpu *gpu, ckjit_kernel *k) {
  const ckjit_device *d = &gpu->device;
  if (!ckjit__arch_compatible(gpu->arch, d->arch))
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "kernels are compiled for arch %s (CKJIT_ARCH) but the device is %s (%s): "
                       "code for another arch cannot be launched here",
                       gpu->arch, d->arch, d->name);
  ckjit_runtime *rt;
  ckjit_status st = ckjit__runtime_get(&rt);
  if (st) return st;
  ckjit_build_result built;
  double t_build = ckjit__now_ms();
  if ((st = ckjit__build(rt, &k->spec, gpu->arch, &built))) return st;
  double t0 = ckjit__now_ms();
  t_build = t0 - t_build;
  st = d->module_load(d, built.code.data, built.code.size, &k->module);
  ckjit__buf_free(&built.code);
  if (st == CKJIT_SUCCESS) {
    const ckjit_family *fam = ckjit__family_get(k->spec.family);
    st = d->get_function(d, k->module, fam->kernel, &k->function);
    if (st) {
      d->module_unload(d, k->module);
      k->module = NULL;
    }
  }
  ckjit__stat_add(st ? CKJIT_STAT_LOAD_FAILURES : CKJIT_STAT_LOADS, 1);
  if (st == CKJIT_SUCCESS) {
    double load_ms = ckjit__now_ms() - t0;
    ckjit__stat_add_load_ms(load_ms);
    CKJIT_INFO("kernel ready on device %d: %s %.3f ms + load %.3f ms", d->ordinal,
               built.from_disk ? "disk hit" : built.from_remote ? "remote hit" : "compile", t_build,
               load_ms);
  }
  return st;
}

static ckjit_status get_slow(ckjit_gpu *gpu, const ckjit_spec *spec, uint64_t hash,
                             ckjit_kernel **out) {
  int created;
  ckjit_kernel *k = ckjit__memcache_insert(&gpu->kernels, spec, hash, &created);
  if (!k) return ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "out of memory in the kernel table");
  if (!created) {
    int expected = CKJIT_ENTRY_FAILED;
    /* An entry that failed before is rebuilt by the first caller to claim it
     * (the cause may have gone, e.g. a full disk or a missing library). */
    if (atomic_compare_exchange_strong(&k->state, &expected, CKJIT_ENTRY_PENDING)) {
      created = 1;
    } else {
      int state = ckjit__memcache_wait(k);
      if (state == CKJIT_ENTRY_READY) {
        *out = k;
        return CKJIT_SUCCESS;
      }
      return ckjit__fail(k->error_status, "%s", k->error_message ? k->error_message : "build failed");
    }
  }
  ckjit_status st = build_kernel(gpu, k);
  if (st) {
    /* Keep the message for threads that waited on this build. */
    char *old = k->error_message;
    k->error_message = strdup(ckjit__error_latest());
    k->error_status = st;
    free(old);
    ckjit__memcache_publish(k, CKJIT_ENTRY_FAILED);
    return st;
  }
  ckjit__memcache_publish(k, CKJIT_ENTRY_READY);
  ckjit__record(&k->spec, gpu->arch); /* CKJIT_RECORD: first build in this process */
  *out = k;
  return CKJIT_SUCCESS;
}

/* The GPU of `stream`; `any_context`: a private context counts as its
 * device (the memory helpers) instead of being refused (ops). */
static ckjit_status resolve(void *stream, int any_context, ckjit_gpu **out) {
  ckjit_runtime *rt;
  ckjit_status st = ckjit__runtime_device(&rt);
  if (st) return st;
  ckjit_gpu *home = atomic_load_explicit(&rt->gpus[rt->default_ordinal], memory_order_relaxed);
  *out = home;
  if ((uintptr_t)stream > 2 && !rt->ask_streams) return CKJIT_SUCCESS;
  void *context;
  if ((st = home->device.stream_context(stream, &context))) return st;
  if (!context || context == home->device.context) return CKJIT_SUCCESS;
  for (int i = 0; i < rt->device_count; i++) {
    ckjit_gpu *gpu = atomic_load_explicit(&rt->gpus[i], memory_order_acquire);
    if (gpu && gpu->device.context == context) {
      *out = gpu;
      return CKJIT_SUCCESS;
    }
  }
  return ckjit__runtime_gpu_of_context(rt, context, stream, any_context, out);
}

ckjit_status ckjit__stream_gpu(void *stream, ckjit_gpu **out) { return resolve(stream, 0, out); }

ckjit_status ckjit__current_gpu(ckjit_gpu **out) { return resolve(NULL, 1, out); }

ckjit_status ckjit__kernel_get(ckjit_gpu *gpu, const ckjit_spec *spec, ckjit_kernel **out) {
  uint64_t hash = ckjit__spec_hash(spec);
  ckjit_kernel *k = ckjit__memcache_find(&gpu->kernels, spec, hash);
  if (k && atomic_load_explicit(&k->state, memory_order_acquire) == CKJIT_ENTRY_READY) {
    atomic_fetch_add_explicit(&gpu->memory_hits, 1, memory_order_relaxed);
    *out = k;
    return CKJIT_SUCCESS;
  }
  return get_slow(gpu, spec, hash, out);
}

/* With one GPU an explicit stream is not asked before the launch, and one
 * of another context fails in the driver ("invalid handle" and the like):
 * say whose stream it is instead. */
static ckjit_status explain_stream_failure(ckjit_gpu *gpu, ckjit_status st, void *stream) {
  if (st == CKJIT_SUCCESS || st == CKJIT_ERROR_OUT_OF_MEMORY || (uintptr_t)stream <= 2) return st;
  ckjit_runtime *rt = ckjit__runtime_if_ready();
  void *context;
  if (!rt || rt->ask_streams) return st;
  ckjit_status why = gpu->device.stream_context(stream, &context);
  if (why || !context || context == gpu->device.context) return why ? why : st;
  ckjit_gpu *owner;
  why = ckjit__runtime_gpu_of_context(rt, context, stream, 0, &owner);
  return why ? why : st;
}

ckjit_status ckjit__kernel_launch(ckjit_gpu *gpu, const ckjit_kernel *k, const unsigned grid[3],
                                  const unsigned block[3], unsigned cluster,
                                  unsigned shared_bytes, void *stream,
                                  const void *args, const ckjit_abi_params *params) {
  void *param[CKJIT_ABI_MAX_PARAMS];
  for (int i = 0; i < params->count; i++) param[i] = (char *)args + params->offset[i];
  const ckjit_device *d = &gpu->device;
  ckjit_device_scope scope;
  ckjit_status st = d->enter(d, &scope);
  if (st) return st;
  st = d->launch(k->function, grid, block, cluster, shared_bytes, stream, param);
  d->leave(d, &scope);
  return explain_stream_failure(gpu, st, stream);
}

ckjit_status ckjit__scratch_alloc(ckjit_gpu *gpu, size_t bytes, void *stream, void **ptr) {
  ckjit_device *d = &gpu->device;
  ckjit_device_scope scope;
  ckjit_status st = d->enter(d, &scope);
  if (st) return st;
  st = d->mem_alloc_async(d, ptr, bytes ? bytes : 1, stream);
  d->leave(d, &scope);
  return explain_stream_failure(gpu, st, stream);
}

ckjit_status ckjit__scratch_free(ckjit_gpu *gpu, void *ptr, void *stream) {
  const ckjit_device *d = &gpu->device;
  ckjit_device_scope scope;
  ckjit_status st = d->enter(d, &scope);
  if (st) return st;
  st = d->mem_free_async(ptr, stream);
  d->leave(d, &scope);
  return explain_stream_failure(gpu, st, stream);
}

ckjit_status ckjit__check_pointers(void *stream, const char *api, int n, const void *const *ptrs,
                                   const char *const *names) {
  ckjit_runtime *rt;
  ckjit_gpu *gpu;
  /* Without a device, or with a stream that cannot be placed, the op fails
   * later with the reason. */
  if (ckjit__runtime_get(&rt) || !rt->check_pointers || ckjit__stream_gpu(stream, &gpu) ||
      !gpu->device.check_pointer)
    return CKJIT_SUCCESS;
  ckjit_status st;
  for (int i = 0; i < n; i++)
    if (ptrs[i] && (st = gpu->device.check_pointer(&gpu->device, api, names[i], ptrs[i]))) return st;
  return CKJIT_SUCCESS;
}
