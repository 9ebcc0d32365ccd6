/* ckjit_paged_kv_check: a paged cache's tables read back and checked on the
 * host, with the first bad entry named (the kernels only flag one). */
#include <stdlib.h>

#include "attention.h"
#include "base/error.h"

#define API "ckjit_paged_kv_check"

/* n int32 from the device (after `stream`'s work), or NULL (failed). */
static int32_t *fetch(const int32_t *src, int64_t n, const char *name, ckjit_status *st) {
  int32_t *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
  if (!h) {
    *st = ckjit__fail(CKJIT_ERROR_OUT_OF_MEMORY, "%s: no host memory for %s (%lld entries)", API,
                      name, (long long)n);
    return NULL;
  }
  if (n > 0 && (*st = ckjit_memcpy(h, src, (size_t)n * sizeof *h, CKJIT_DEVICE_TO_HOST))) {
    free(h);
    return NULL;
  }
  return h;
}

static ckjit_status bad_page(int64_t b, int64_t index, int32_t id, int64_t num_pages) {
  return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                     "%s: sequence %lld, page %lld: page id %d is outside the pool (0 .. %lld)",
                     API, (long long)b, (long long)index, id, (long long)num_pages - 1);
}

static ckjit_status check_padded(const ckjit_paged_kv *kv, int64_t batch) {
  ckjit_status st = CKJIT_SUCCESS;
  int64_t cells;
  if (__builtin_mul_overflow(batch, kv->max_pages_per_seq, &cells) || cells > (INT64_C(1) << 40))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: the block table is too large", API);
  int32_t *lens = fetch(kv->seqlens_k, batch, "seqlens_k", &st), *table = NULL;
  if (lens) table = fetch(kv->block_table, cells, "block_table", &st);
  for (int64_t b = 0; table && !st && b < batch; b++) {
    const int64_t len = lens[b], capacity = kv->max_pages_per_seq * kv->page_size;
    if (len < 0 || len > capacity || len > (1 << 30)) {
      st = ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: sequence %lld: seqlens_k %lld is outside 0 .. %lld (the table's %lld "
                       "pages of %lld slots, at most 2^30)",
                       API, (long long)b, (long long)len, (long long)capacity,
                       (long long)kv->max_pages_per_seq, (long long)kv->page_size);
      break;
    }
    for (int64_t i = 0; i * kv->page_size < len; i++) {
      const int32_t id = table[b * kv->max_pages_per_seq + i];
      if (id < 0 || id >= kv->num_pages) {
        st = bad_page(b, i, id, kv->num_pages);
        break;
      }
    }
  }
  free(lens);
  free(table);
  return st;
}

static ckjit_status check_csr(const ckjit_paged_kv *kv, int64_t batch) {
  ckjit_status st = CKJIT_SUCCESS;
  int32_t *indptr = fetch(kv->kv_indptr, batch + 1, "kv_indptr", &st), *last = NULL, *ids = NULL;
  if (indptr) last = fetch(kv->kv_last_page_len, batch, "kv_last_page_len", &st);
  if (last) {
    for (int64_t b = 0; b < batch && !st; b++)
      if (indptr[b] < 0 || indptr[b + 1] < indptr[b])
        st = ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                         "%s: kv_indptr[%lld..%lld] = %d, %d: must be non-negative and "
                         "non-decreasing",
                         API, (long long)b, (long long)b + 1, indptr[b], indptr[b + 1]);
    if (!st) ids = fetch(kv->kv_page_indices, indptr[batch], "kv_page_indices", &st);
  }
  for (int64_t b = 0; ids && !st && b < batch; b++) {
    const int64_t count = indptr[b + 1] - indptr[b];
    if (count > 0 && (last[b] < 1 || last[b] > kv->page_size))
      st = ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: sequence %lld: kv_last_page_len %d is outside 1 .. %lld", API,
                       (long long)b, last[b], (long long)kv->page_size);
    else if ((count - 1) * kv->page_size + (count > 0 ? last[b] : 0) > (1 << 30))
      st = ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: sequence %lld holds more than 2^30 keys",
                       API, (long long)b);
    for (int64_t i = 0; !st && i < count; i++) {
      const int32_t id = ids[indptr[b] + i];
      if (id < 0 || id >= kv->num_pages) st = bad_page(b, i, id, kv->num_pages);
    }
  }
  free(indptr);
  free(last);
  free(ids);
  return st;
}

ckjit_status ckjit_paged_kv_check(const ckjit_paged_kv *kv, int64_t batch, void *stream) {
  if (!kv) return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: kv is NULL", API);
  if (batch < 0 || batch > INT32_MAX - 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "%s: batch %lld must be in 0 .. 2^31 - 2",
                       API, (long long)batch);
  ckjit_status st = ckjit__paged_kv_validate_sizes(API, kv);
  if (st) return st;
  const int csr = kv->kv_indptr != NULL;
  if (csr ? !kv->kv_page_indices || !kv->kv_last_page_len
          : !kv->block_table || !kv->seqlens_k || kv->max_pages_per_seq < 1)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT,
                       "%s: give block_table, seqlens_k and max_pages_per_seq >= 1, or kv_indptr, "
                       "kv_page_indices and kv_last_page_len",
                       API);
  if (batch == 0) return CKJIT_SUCCESS;
  if ((st = ckjit_synchronize(stream))) return st; /* the tables as the stream leaves them */
  return csr ? check_csr(kv, batch) : check_padded(kv, batch);
}
