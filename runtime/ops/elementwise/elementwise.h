/* The elementwise op family, shared by the copy, unary and binary
 * front-ends. */
#ifndef CKJIT_RUNTIME_OPS_ELEMENTWISE_H
#define CKJIT_RUNTIME_OPS_ELEMENTWISE_H

#include "abi/elementwise_args.h"
#include "ckjit/ckjit.h"
#include "runtime/spec.h"

/* Parameters of the elementwise kernel family, in spec order. */
enum { EW_DTYPE, EW_OP, EW_EPILOGUE, EW_VEC, EW_THREADS, EW_UNROLL, EW_PARAM_COUNT };

/* Values of the `op` parameter: OP_IDENTITY ... OP_SIGMOID (unary, in the
 * order of ckjit_unary_op), then OP_ADD ... OP_MIN (binary, in the order of
 * ckjit_binary_op). */
enum { CKJIT_ELEMENTWISE_OPS(CKJIT_ENUM_CONSTANT) CKJIT_EW_OP_COUNT };
enum { CKJIT_EW_UNARY_FIRST = OP_IDENTITY, CKJIT_EW_BINARY_FIRST = OP_ADD };

/* Validates, plans and runs y = epilogue(op(a [, b])).  `api` names the
 * public function in error messages.  `b`/`ld_b` are ignored for unary ops
 * (ew_op < CKJIT_EW_BINARY_FIRST). */
ckjit_status ckjit__elementwise(const char *api, int ew_op, ckjit_dtype dtype, int64_t rows,
                                int64_t cols, const void *a, int64_t ld_a, const void *b,
                                int64_t ld_b, void *y, int64_t ld_y,
                                const ckjit_epilogue *epilogue, void *stream);

#endif
