// Thread-block clusters (NVIDIA sm_90): the blocks of a cluster run at
// once on one GPC, can arrive on each other's mbarriers, and receive one
// TMA load multicast into all their shared memories at the same offset.
#pragma once
#include "core/prelude.h"
#if defined(CKJIT_NVIDIA)

// This block's rank in its cluster (0 .. cluster size - 1).
CKJIT_INLINE unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Every thread of every block of the cluster; what each wrote before is
// visible to all after (release / acquire).  It also stands for
// __syncthreads.
CKJIT_INLINE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// One arrival on the mbarrier at `bar` (a shared::cta address of this
// block) in block `rank` of the cluster: the same offset there.  Release at
// the CTA's scope only: it says a stage's shared memory has been read
// (wgmma reads are complete once waited for), which needs no cluster-wide
// fence of this thread's own writes.
CKJIT_INLINE void mbar_arrive_cluster(unsigned bar, unsigned rank) {
  asm volatile("{\n"
               ".reg .b32 remote;\n"
               "mapa.shared::cluster.u32 remote, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
               "}" ::"r"(bar), "r"(rank)
               : "memory");
}

// A 3-D TMA box (core/tma.h) written to `dst` in every block of `mask`
// (bit r: rank r), each completing its bytes on its own mbarrier at `bar`.
CKJIT_INLINE void tma_load_multicast(unsigned dst, const void *map, int c0, int c1, int c2,
                                     unsigned bar, unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst),
               "l"(reinterpret_cast<ckjit_u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask)
               : "memory");
}

#endif
