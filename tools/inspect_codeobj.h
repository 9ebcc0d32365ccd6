/* Resource use of the kernels in a code object, read from the object itself.
 *
 * NVIDIA (a cubin: ELF, e_machine EM_CUDA = 190), from the ELF sections:
 *   registers      EIATTR_REGCOUNT (0x2f) of the kernel's symbol in .nv.info
 *                  or .nv.info.<kernel>; older cubins: .text.<kernel>
 *                  sh_info >> 24
 *   stack / local  EIATTR_FRAME_SIZE (0x11), EIATTR_MIN_STACK_SIZE (0x12),
 *                  EIATTR_MAX_STACK_SIZE (0x23)
 *   shared memory  the size of .nv.shared.<kernel> (NOBITS); on sm_90+ that
 *                  section also spans the 1 KiB per-block reserve that the
 *                  kernel references through .nv.reservedSmem.offset0
 *                  (.nv.reservedSmem.cap gives its size when present): it is
 *                  reported apart from the kernel's own static shared memory
 *   constant bank  the size of .nv.constant0.<kernel>; parameters:
 *                  EIATTR_CBANK_PARAM_SIZE (0x19)
 *   block size     EIATTR_MAX_THREADS (0x05, __launch_bounds__) or
 *                  EIATTR_REQNTID (0x10)
 *   others         EIATTR_MAXREG_COUNT (0x1b), EIATTR_NUM_BARRIERS (0x4c),
 *                  EIATTR_CRS_STACK_SIZE (0x1e)
 * An .nv.info record is a format byte, an attribute byte and a 16-bit
 * little-endian word; for format EIFMT_SVAL (4) the word is the size of the
 * data that follows (a symbol index, then 32-bit values), for the other
 * formats (EIFMT_NVAL 1, EIFMT_BVAL 2, EIFMT_HVAL 3) the word is the value.
 * Checked against ptxas -v (NVRTC -Xptxas -v) for NVRTC 13.0 cubins for
 * sm_75, sm_80, sm_89, sm_90, sm_90a and sm_100 (tests/tools/test_inspect_tool.c
 * repeats the check for sm_90).  Spill bytes are not recorded in a cubin:
 * they are 0 when the stack frame is 0, else unknown (-1); the frame is the
 * upper bound of what spills use.
 *
 * AMD (an AMDGPU ELF, e_machine EM_AMDGPU = 224, or a clang offload bundle
 * holding one), from the NT_AMDGPU_METADATA note (msgpack): per kernel
 * .vgpr_count (on gfx90a/gfx94x the unified total, AGPRs included, as LLVM
 * computes it), .agpr_count, .sgpr_count, .vgpr_spill_count,
 * .sgpr_spill_count, .group_segment_fixed_size (LDS),
 * .private_segment_fixed_size (scratch per lane), .max_flat_workgroup_size,
 * .wavefront_size, .kernarg_segment_size, .uses_dynamic_stack.
 *
 * Parsing is bounds-checked throughout: a malformed object gives an error,
 * never a read outside the buffer. */
#ifndef CKJIT_TOOLS_INSPECT_CODEOBJ_H
#define CKJIT_TOOLS_INSPECT_CODEOBJ_H

#include <stddef.h>
#include <stdint.h>

typedef enum inspect_vendor { INSPECT_NVIDIA = 1, INSPECT_AMD = 2 } inspect_vendor;

/* Every count is -1 when the object does not say. */
typedef struct inspect_kernel {
  char name[128];
  inspect_vendor vendor;
  int64_t max_threads;   /* launch bound (product of x, y, z), or -1 */
  int64_t lds_bytes;     /* NVIDIA: static shared memory; AMD: group segment */
  int64_t local_bytes;   /* NVIDIA: stack frame; AMD: private segment per lane */
  /* NVIDIA */
  int64_t regs;          /* registers per thread */
  int64_t reserved_smem; /* per-block shared memory reserve inside .nv.shared.<k> */
  int64_t min_stack, max_stack, crs_stack;
  int64_t spill_bytes;   /* 0 when there is no frame, else -1 (unknown) */
  int64_t max_regs;      /* EIATTR_MAXREG_COUNT */
  int64_t barriers;
  int64_t const0_bytes, param_bytes;
  int64_t code_bytes;    /* size of .text.<kernel> (NVIDIA) */
  /* AMD */
  int64_t vgpr, agpr, sgpr, vgpr_spill, sgpr_spill;
  int64_t wavefront;
  int64_t kernarg_bytes;
  int dynamic_stack;     /* .uses_dynamic_stack; -1 unknown */
} inspect_kernel;

typedef struct inspect_object {
  inspect_vendor vendor;
  char target[96];       /* "sm_90" (from e_flags) or "gfx90a..." (amdhsa.target) */
  size_t n_kernels;
  inspect_kernel *kernels; /* malloc'ed */
} inspect_object;

/* Reads the code object `buf` (not modified).  Returns 0, or -1 with a
 * reason in `err`. */
int inspect_code_object(const void *buf, size_t size, inspect_object *out, char *err,
                        size_t err_len);
void inspect_object_free(inspect_object *obj);

#endif
