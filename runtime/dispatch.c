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

static ckjit_status build_kernel(ckjit_runtime *rt, ckjit_kernel *k) {
  if (!ckjit__arch_compatible(rt->arch, rt->device.arch))
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "kernels are compiled for arch %s (CKJIT_ARCH) but the device is %s (%s): "
                       "code for another arch cannot be launched here",
                       rt->arch, rt->device.arch, rt->device.name);
  ckjit_build_result built;
  double t_build = ckjit__now_ms();
  ckjit_status st = ckjit__build(rt, &k->spec, rt->arch, &built);
  if (st) return st;
  double t0 = ckjit__now_ms();
  t_build = t0 - t_build;
  st = rt->device.module_load(&rt->device, built.code.data, built.code.size, &k->module);
  ckjit__buf_free(&built.code);
  if (st == CKJIT_SUCCESS) {
    const ckjit_family *fam = ckjit__family_get(k->spec.family);
    st = rt->device.get_function(&rt->device, k->module, fam->kernel, &k->function);
    if (st) {
      rt->device.module_unload(&rt->device, k->module);
      k->module = NULL;
    }
  }
  ckjit__stat_add(st ? CKJIT_STAT_LOAD_FAILURES : CKJIT_STAT_LOADS, 1);
  if (st == CKJIT_SUCCESS) {
    double load_ms = ckjit__now_ms() - t0;
    ckjit__stat_add_load_ms(load_ms);
    CKJIT_INFO("kernel ready: %s %.3f ms + load %.3f ms", built.from_disk ? "disk hit" : "compile",
               t_build, load_ms);
  }
  return st;
}

static ckjit_status get_slow(ckjit_runtime *rt, const ckjit_spec *spec, uint64_t hash,
                             ckjit_kernel **out) {
  int created;
  ckjit_kernel *k = ckjit__memcache_insert(spec, hash, &created);
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
  ckjit_status st = build_kernel(rt, k);
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
  ckjit__record(&k->spec, rt->arch); /* CKJIT_RECORD: first build in this process */
  *out = k;
  return CKJIT_SUCCESS;
}

ckjit_status ckjit__kernel_get(const ckjit_spec *spec, ckjit_runtime **rtp, ckjit_kernel **out) {
  ckjit_runtime *rt;
  ckjit_status st = ckjit__runtime_device(&rt);
  if (st) return st;
  *rtp = rt;
  uint64_t hash = ckjit__spec_hash(spec);
  ckjit_kernel *k = ckjit__memcache_find(spec, hash);
  if (k && atomic_load_explicit(&k->state, memory_order_acquire) == CKJIT_ENTRY_READY) {
    ckjit__stat_add(CKJIT_STAT_MEMORY_HITS, 1);
    *out = k;
    return CKJIT_SUCCESS;
  }
  return get_slow(rt, spec, hash, out);
}

/* Unchecked (one GPU), a stream of another context fails in the driver
 * ("invalid handle" and the like): say whose stream it is instead.  Run
 * after leaving, so that the default stream means the caller's. */
static ckjit_status explain_stream_failure(ckjit_runtime *rt, ckjit_status st, void *stream) {
  if (st == CKJIT_SUCCESS || st == CKJIT_ERROR_OUT_OF_MEMORY || rt->device.check_device) return st;
  ckjit_status why = rt->device.check_stream(&rt->device, stream);
  return why ? why : st;
}

ckjit_status ckjit__kernel_launch(ckjit_runtime *rt, const ckjit_kernel *k, const unsigned grid[3],
                                  const unsigned block[3], unsigned shared_bytes, void *stream,
                                  const void *args, const ckjit_abi_params *params) {
  void *param[CKJIT_ABI_MAX_PARAMS];
  for (int i = 0; i < params->count; i++) param[i] = (char *)args + params->offset[i];
  ckjit_device_scope scope;
  ckjit_status st = rt->device.enter(&rt->device, &stream, &scope);
  if (st) return st;
  st = rt->device.launch(k->function, grid, block, shared_bytes, stream, param);
  rt->device.leave(&rt->device, &scope);
  return explain_stream_failure(rt, st, stream);
}

ckjit_status ckjit__scratch_alloc(ckjit_runtime *rt, size_t bytes, void *stream, void **ptr) {
  ckjit_device_scope scope;
  ckjit_status st = rt->device.enter(&rt->device, &stream, &scope);
  if (st) return st;
  st = rt->device.mem_alloc_async(ptr, bytes ? bytes : 1, stream);
  rt->device.leave(&rt->device, &scope);
  return explain_stream_failure(rt, st, stream);
}

ckjit_status ckjit__scratch_free(ckjit_runtime *rt, void *ptr, void *stream) {
  ckjit_device_scope scope;
  ckjit_status st = rt->device.enter(&rt->device, &stream, &scope);
  if (st) return st;
  st = rt->device.mem_free_async(ptr, stream);
  rt->device.leave(&rt->device, &scope);
  return explain_stream_failure(rt, st, stream);
}

ckjit_status ckjit__check_pointers(const char *api, int n, const void *const *ptrs,
                                   const char *const *names) {
  ckjit_runtime *rt;
  /* Without a device the op fails later with the reason, as before. */
  if (ckjit__runtime_get(&rt) || !rt->device.check_device || !rt->device.check_pointer)
    return CKJIT_SUCCESS;
  ckjit_status st;
  for (int i = 0; i < n; i++)
    if (ptrs[i] && (st = rt->device.check_pointer(&rt->device, api, names[i], ptrs[i]))) return st;
  return CKJIT_SUCCESS;
}
