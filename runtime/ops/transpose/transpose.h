/* The transpose op family (kernel_src/elementwise/transpose.cu). */
#ifndef CKJIT_RUNTIME_OPS_TRANSPOSE_H
#define CKJIT_RUNTIME_OPS_TRANSPOSE_H

/* Parameters of the transpose kernel family, in spec order. */
enum { TRANSPOSE_DTYPE, TRANSPOSE_TILE, TRANSPOSE_VEC, TRANSPOSE_THREADS, TRANSPOSE_PARAM_COUNT };

/* The widest vector the tile policy takes: 16 bytes, at most 8 elements. */
enum { TRANSPOSE_MAX_VEC = 8 };

#endif
