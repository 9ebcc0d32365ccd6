// Mixture-of-experts routing sorted by expert (include/ckjit/moe.h).
//
// One block per expert, all in one launch (no host synchronization, no
// workspace): each block counts every expert's entries (a histogram in
// shared memory), so it knows where its own run starts; then it gathers
// its entries in entry order, a chunk of THREADS x PER entries at a time
// (each thread PER consecutive entries; see PER): a block-wide scan of the
// threads' match counts places each thread's matches after the earlier
// threads' and chunks' (stable, so the result is the same bits every run).
// Block e also pads its run, writes its tiles' expert and its offset and
// count; block 0 writes the tail past the last run and the totals.
#include "core/prelude.h"
#include "abi/moe_sort_args.h"
#include "moe/local_expert.h"
// @PARAMETERS@

#define MAX_EXPERTS 1024
#if IDS_TYPE == IDS_I64
typedef long long IDS;
#else
typedef int IDS;
#endif

// Entries a thread takes per chunk: 16 loads in flight, and 4096 tokens
// x top-8 in 8 chunks (each chunk costs a block scan and its barriers).
// A chunk is read coalesced (load v of thread t: entry v * THREADS + t)
// and each entry's match flag parked in shared memory, where thread t
// then finds the flags of its own PER consecutive entries: one scan
// orders the chunk's matches.
#define PER 16
#define WARPS (THREADS / CKJIT_WARP_SIZE)

CKJIT_INLINE int shfl_up_int(int v, int d) {
#if defined(CKJIT_NVIDIA)
  return __shfl_up_sync(0xffffffffu, v, d);
#else
  return __shfl_up(v, d);
#endif
}

// The block-wide exclusive prefix sum of v (every thread calls it), and the
// block's total.
CKJIT_INLINE int block_scan(int v, int *warp_sums, int &total) {
  const int lane = threadIdx.x % CKJIT_WARP_SIZE, w = threadIdx.x / CKJIT_WARP_SIZE;
  int inc = v;
  for (int d = 1; d < CKJIT_WARP_SIZE; d *= 2) {
    const int u = shfl_up_int(inc, d);
    if (lane >= d) inc += u;
  }
  if (lane == CKJIT_WARP_SIZE - 1) warp_sums[w] = inc;
  __syncthreads();
  int before = 0;
  total = 0;
  for (int j = 0; j < WARPS; j++) {
    const int sum = warp_sums[j];
    before += j < w ? sum : 0;
    total += sum;
  }
  __syncthreads(); // warp_sums is rewritten by the next call
  return before + inc - v;
}

// MAP (a spec parameter): the ids go through an expert map (expert
// parallelism).  The kernel without one is the plain sort, its lookups
// compiled out (behind a runtime test they made ptxas spill, and the sort
// ran 2x slower: bench/NOTES.md).
extern "C" __global__ void __launch_bounds__(THREADS)
ckjit_moe_sort(const ckjit_moe_sort_args x) {
  __shared__ int hist[MAX_EXPERTS];
  __shared__ int warp_sums[WARPS];
  __shared__ __align__(16) unsigned char match[THREADS * PER];
  const int e = blockIdx.x, t = threadIdx.x;
  const IDS *ids = static_cast<const IDS *>(x.topk_ids);
#if MAP
  __shared__ int elsewhere; // (block 0) entries routed to another device's experts
  const int experts = x.experts, global_experts = x.global_experts;
  const int *const map = x.expert_map;
  auto local = [=](long long id) { return moe_local_expert(id, experts, map, global_experts); };
  if (t == 0) elsewhere = 0;
#endif
  for (int j = t; j < x.experts; j += THREADS) hist[j] = 0;
  __syncthreads();
  for (long long base = 0; base < x.entries; base += (long long)THREADS * PER) {
    long long id[PER];
#pragma unroll
    for (int v = 0; v < PER; v++) {
      const long long i = base + v * THREADS + t;
      id[v] = i < x.entries ? (long long)ids[i] : -1;
    }
#if MAP
#pragma unroll
    for (int v = 0; v < PER; v++) { // (past the entries id is -1: invalid, not counted)
      const int le = local(id[v]);
      if (le >= 0) atomicAdd(&hist[le], 1);
      else if (le == MOE_ELSEWHERE && e == 0) atomicAdd(&elsewhere, 1);
    }
#else
#pragma unroll
    for (int v = 0; v < PER; v++)
      if (id[v] >= 0 && id[v] < x.experts) atomicAdd(&hist[id[v]], 1);
#endif
  }
  __syncthreads();
  // Where this expert's run starts (the padded runs of the experts before
  // it) and the padded total.
  const int tile = x.tile_m;
  int below = 0, all = 0;
  for (int j = t; j < x.experts; j += THREADS) {
    const int padded_j = (hist[j] + tile - 1) / tile * tile;
    all += padded_j;
    below += j < e ? padded_j : 0;
  }
  int start, total;
  block_scan(below, warp_sums, start);
  block_scan(all, warp_sums, total);
  const int count = hist[e], padded = (count + tile - 1) / tile * tile;
  const int sentinel = (int)x.entries;

  int at = start; // where the next chunk's first match goes
  for (long long base = 0; base < x.entries; base += (long long)THREADS * PER) {
#pragma unroll
    for (int v = 0; v < PER; v++) {
      const long long i = base + v * THREADS + t;
#if MAP
      match[v * THREADS + t] = i < x.entries && local(ids[i]) == e;
#else
      match[v * THREADS + t] = i < x.entries && ids[i] == e;
#endif
    }
    __syncthreads();
    const uint4 mine4 = *reinterpret_cast<const uint4 *>(&match[t * PER]);
    const unsigned words[4] = {mine4.x, mine4.y, mine4.z, mine4.w}; // a byte (0 or 1) an entry
    const int mine = __popc(words[0]) + __popc(words[1]) + __popc(words[2]) + __popc(words[3]);
    int chunk;
    int pos = at + block_scan(mine, warp_sums, chunk); // (its barriers free `match` for the next chunk)
    const long long i0 = base + (long long)t * PER;
#pragma unroll
    for (int v = 0; v < PER; v++)
      if (words[v / 4] >> (8 * (v % 4)) & 1) x.sorted_ids[pos++] = (int)(i0 + v);
    at += chunk;
  }

  for (int p = count + t; p < padded; p += THREADS) x.sorted_ids[start + p] = sentinel;
  for (int q = t; q < padded / tile; q += THREADS) x.tile_experts[start / tile + q] = e;
  if (t == 0) x.offsets[e] = start, x.counts[e] = count;
  if (e != 0) return;
  for (long long p = total + t; p < x.capacity; p += THREADS) x.sorted_ids[p] = sentinel;
  for (long long q = total / tile + t; q < x.capacity / tile; q += THREADS) x.tile_experts[q] = -1;
  if (t == 0) {
    x.offsets[x.experts] = total;
    if (x.total) *x.total = total;
    if (x.invalid) {
      long long valid = 0;
      for (int j = 0; j < x.experts; j++) valid += hist[j];
#if MAP
      valid += elsewhere; // routed elsewhere: not invalid
#endif
      *x.invalid = (int)(x.entries - valid);
    }
  }
}
CKJIT_ABI_KERNEL(ckjit_moe_sort, CKJIT_MOE_SORT_PARAM);
