// A paged K/V cache's tables on the device (ckjit_attention_paging in
// abi/attention_args.h): one sequence's page ids and key count, from the
// padded table or the CSR form.  Shared by the attention kernels
// (problem.h) and paged_append.
//
// Needs PAGE (slots per page, a spec parameter; 0 in dense kernels, which
// never call these).
#pragma once
#include "core/prelude.h"
#include "abi/attention_args.h"

#define PAGE_SLOTS (PAGE > 0 ? PAGE : 1)

// Sequence b's page ids and key count.  A length the table cannot hold,
// past 2^30 (the 32-bit mask arithmetic's bound) or negative is cut to
// what it holds (0 when negative), as is a CSR entry whose last page
// length is outside 1 .. PAGE or whose page count is negative; each is
// reported through `error`.
CKJIT_INLINE void paged_sequence(const ckjit_attention_paging &p, int b, const int *&pages, int &len_out) {
  long long len, capacity;
  if (p.kv_indptr) {
    const int first = p.kv_indptr[b], count = p.kv_indptr[b + 1] - first;
    const int last = count > 0 ? p.kv_last_page_len[b] : PAGE_SLOTS;
    pages = p.page_table + first;
    capacity = count > 0 ? (long long)count * PAGE_SLOTS : 0;
    len = count < 0 || last < 1 || last > PAGE_SLOTS ? -1 : capacity - PAGE_SLOTS + last;
    if (count == 0) len = 0;
  } else {
    pages = p.page_table + b * p.table_stride;
    capacity = p.table_stride * PAGE_SLOTS;
    len = p.seqlens_k[b];
  }
  if (capacity > CKJIT_ATTENTION_UNBOUNDED) capacity = CKJIT_ATTENTION_UNBOUNDED;
  if ((len < 0 || len > capacity) && p.error) *p.error = 1;
  len_out = (int)(len < 0 ? 0 : len > capacity ? capacity : len);
}

// The page id of key j of a sequence, or -1 when it lies outside the
// pool's [0, num_pages) (reported; the page is never read or written).
CKJIT_INLINE int paged_page_of(const int *pages, int j, int num_pages, int *error) {
  const int id = pages[j / PAGE_SLOTS];
  if ((unsigned)id < (unsigned)num_pages) return id;
  if (error) *error = 1;
  return -1;
}
