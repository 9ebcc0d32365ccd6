// Mixture-of-experts routing sorted by expert (include/ckjit/moe.h).
//
// One block per expert, all in one launch (no host synchronization, no
// workspace): each block counts every expert's entries (a histogram in
// shared memory), so it knows where its own run starts; then it gathers
// its entries in entry order: each thread takes a contiguous slice of the
// entries, counts its matches, a block scan of those counts gives each
// slice's place, and the thread writes its matches in order (stable, so
// the result is the same bits every run).  Block e also pads its run,
// writes its tiles' expert and its offset and count; block 0 writes the
// tail past the last run and the totals.
#include "core/prelude.h"
#include "abi/moe_sort_args.h"
// @PARAMETERS@

#define MAX_EXPERTS 1024
#if IDS_TYPE == IDS_I64
typedef long long IDS;
#else
typedef int IDS;
#endif

extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_moe_sort(const ckjit_moe_sort_args x) {
  __shared__ int hist[MAX_EXPERTS];
  __shared__ int scan[THREADS];
  __shared__ int run_start, padded_total;
  const int e = blockIdx.x, t = threadIdx.x;
  const IDS *ids = static_cast<const IDS *>(x.topk_ids);
  for (int j = t; j < x.experts; j += THREADS) hist[j] = 0;
  __syncthreads();
  for (long long i = t; i < x.entries; i += THREADS) {
    const long long id = ids[i];
    if (id >= 0 && id < x.experts) atomicAdd(&hist[id], 1);
  }
  __syncthreads();
  const int tile = x.tile_m;
  if (t == 0) {
    int start = 0, total = 0;
    for (int j = 0; j < x.experts; j++) {
      if (j == e) start = total;
      total += (hist[j] + tile - 1) / tile * tile;
    }
    run_start = start, padded_total = total;
  }
  __syncthreads();
  const int start = run_start, count = hist[e], padded = (count + tile - 1) / tile * tile;
  const int sentinel = (int)x.entries;

  // This thread's slice of the entries, its matches counted, then placed.
  const long long per = (x.entries + THREADS - 1) / THREADS;
  const long long lo = t * per < x.entries ? t * per : x.entries;
  const long long hi = lo + per < x.entries ? lo + per : x.entries;
  int mine = 0;
  for (long long i = lo; i < hi; i++) mine += ids[i] == e;
  scan[t] = mine;
  __syncthreads();
  for (int off = 1; off < THREADS; off <<= 1) { // inclusive scan
    const int v = t >= off ? scan[t - off] : 0;
    __syncthreads();
    scan[t] += v;
    __syncthreads();
  }
  int at = start + scan[t] - mine;
  for (long long i = lo; i < hi; i++)
    if (ids[i] == e) x.sorted_ids[at++] = (int)i;

  for (int p = count + t; p < padded; p += THREADS) x.sorted_ids[start + p] = sentinel;
  for (int q = t; q < padded / tile; q += THREADS) x.tile_experts[start / tile + q] = e;
  if (t == 0) x.offsets[e] = start, x.counts[e] = count;
  if (e != 0) return;
  const int total = padded_total;
  for (long long p = total + t; p < x.capacity; p += THREADS) x.sorted_ids[p] = sentinel;
  for (long long q = total / tile + t; q < x.capacity / tile; q += THREADS) x.tile_experts[q] = -1;
  if (t == 0) {
    x.offsets[x.experts] = total;
    if (x.total) *x.total = total;
    if (x.invalid) {
      long long valid = 0;
      for (int j = 0; j < x.experts; j++) valid += hist[j];
      *x.invalid = (int)(x.entries - valid);
    }
  }
}
CKJIT_ABI_KERNEL(ckjit_moe_sort, CKJIT_MOE_SORT_PARAM);
