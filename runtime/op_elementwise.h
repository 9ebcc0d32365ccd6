/* The elementwise op family, shared by copy, unary and binary front-ends. */
#ifndef CKJIT_RUNTIME_OP_ELEMENTWISE_H
#define CKJIT_RUNTIME_OP_ELEMENTWISE_H

#include "ckjit/ckjit.h"

/* Index of the `op` parameter: unary ops first, then binary ones. */
enum { CKJIT_EW_UNARY_FIRST = 0, CKJIT_EW_BINARY_FIRST = 6, CKJIT_EW_OP_COUNT = 12 };

/* Validates, picks the tile policy, specializes and launches.  `api` names
 * the public function in error messages.  `b`/`ld_b` are ignored for unary
 * ops (ew_op < CKJIT_EW_BINARY_FIRST). */
ckjit_status ckjit__elementwise(const char *api, int ew_op, ckjit_dtype dtype, int64_t rows,
                                int64_t cols, const void *a, int64_t ld_a, const void *b,
                                int64_t ld_b, void *y, int64_t ld_y,
                                const ckjit_epilogue *epilogue, void *stream);

/* Argument checks shared by the op front-ends. */
ckjit_status ckjit__check_dtype(const char *api, ckjit_dtype dtype);
/* rows x cols with row stride ld must be addressable: sizes >= 1, ld >= cols,
 * and the byte extent must not overflow. */
ckjit_status ckjit__check_matrix(const char *api, const char *name, const void *ptr, int64_t rows,
                                 int64_t cols, int64_t ld, size_t elem_size);
/* Largest vector (in elements, at most 16 bytes) that every pointer and
 * every stride (in elements) is aligned to. */
int ckjit__pick_vec(size_t elem_size, const void *const *ptrs, int n_ptrs, const int64_t *strides,
                    int n_strides, int max_vec);

#endif
