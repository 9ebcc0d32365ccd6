/* How a kernel-argument header is written.
 *
 * Each family's arguments are defined once, in kernel_src/abi/<family>_args.h,
 * as an X-macro list of (type on the host, field, byte offset).  The host
 * (C11) expands it into a plain struct, fills it and launches the kernel
 * with a pointer per parameter into it; the kernel source (C++17 under
 * NVRTC / hipRTC) embeds the same header and checks that its hand-written
 * signature lays its parameters out exactly as the struct:
 *   - CKJIT_ABI_STRUCT, host side: every field of the struct sits at its
 *     listed offset, and the struct has the listed size;
 *   - CKJIT_ABI_KERNEL, kernel side: parameter i of the kernel has the size
 *     of field i and sits at its listed offset (parameters are laid out like
 *     a struct's members, each at its natural alignment).
 * Both compilers check the same literal table, so they cannot disagree
 * silently.
 * The kernel keeps its own parameter list (with __restrict__, its element
 * types, __grid_constant__): the generated code is the same as with
 * positional arguments, only the host side changes.  The launch passes a
 * pointer per parameter into the struct (S_params), not the struct as one
 * buffer (CU_LAUNCH_PARAM_BUFFER_POINTER): with a buffer the driver does
 * not place a 64-byte aligned parameter (a TMA tensor map) where the
 * kernel needs it (bench/NOTES.md #82).
 *
 * Enumerations that cross the boundary are X-macro lists of (constant,
 * name): the host expands them into its enum and its spec-text names (see
 * runtime/spec.h), and the spec renderer writes `#define CONSTANT value` for
 * each into the kernel source, so both sides use the same identifiers. */
#ifndef CKJIT_KERNEL_ABI_H
#define CKJIT_KERNEL_ABI_H

#define CKJIT_ABI_MEMBER(type, field, offset) type field;
#define CKJIT_ABI_CHECK_FIELD(type, field, offset)                                  \
  _Static_assert(__builtin_offsetof(ckjit_abi_struct, field) == (offset),           \
                 "kernel argument " #field " is not at byte " #offset);

/* typedef struct S {...} S; and, on the host, S_params: where each
 * parameter starts in the struct.  The launch hands the driver one pointer
 * per parameter (cuLaunchKernel's kernelParams), so the driver lays the
 * parameters out itself, as for any kernel.  On the host: every field at
 * its listed offset and the struct BYTES long.  (NVRTC has no offsetof: the
 * kernel side checks the listed offsets against its parameters instead,
 * CKJIT_ABI_KERNEL.) */
#ifdef __cplusplus
#define CKJIT_ABI_STRUCT(S, LIST, BYTES)                                         \
  typedef struct S {                                                             \
    LIST(CKJIT_ABI_MEMBER)                                                       \
  } S;                                                                           \
  static_assert(sizeof(S) == (BYTES), #S " is not " #BYTES " bytes");
#else
#define CKJIT_ABI_MAX_PARAMS 32
typedef struct ckjit_abi_params {
  int count;
  unsigned short offset[CKJIT_ABI_MAX_PARAMS];
} ckjit_abi_params;
/* A kernel whose one parameter is the whole struct (by value). */
static const ckjit_abi_params ckjit_abi_by_value = {1, {0}};
#define CKJIT_ABI_ONE(type, field, offset) +1
#define CKJIT_ABI_OFFSET(type, field, offset) (offset),
#define CKJIT_ABI_STRUCT(S, LIST, BYTES)                                         \
  typedef struct S {                                                             \
    LIST(CKJIT_ABI_MEMBER)                                                       \
  } S;                                                                           \
  static const ckjit_abi_params S##_params = {0 LIST(CKJIT_ABI_ONE), {LIST(CKJIT_ABI_OFFSET)}}; \
  static inline void S##_layout_check(void) {                                    \
    typedef S ckjit_abi_struct;                                                  \
    LIST(CKJIT_ABI_CHECK_FIELD)                                                  \
    _Static_assert(sizeof(S) == (BYTES), #S " is not " #BYTES " bytes");         \
    _Static_assert((0 LIST(CKJIT_ABI_ONE)) <= CKJIT_ABI_MAX_PARAMS, #S ": too many fields"); \
  }
#endif

#ifdef __cplusplus
struct ckjit_abi_field {
  unsigned long long size, offset;
};
#define CKJIT_ABI_FIELD_ENTRY(type, field, offset) {sizeof(type), (offset)},

template <class F> struct ckjit_abi_params;
template <class... P> struct ckjit_abi_params<void(P...)> {
  template <unsigned long long N>
  static constexpr __host__ __device__ bool match(const ckjit_abi_field (&f)[N]) {
    const unsigned long long size[] = {sizeof(P)...}, align[] = {alignof(P)...};
    if (N != sizeof...(P)) return false;
    unsigned long long offset = 0;
    for (unsigned long long i = 0; i < N; i++) {
      offset = (offset + align[i] - 1) / align[i] * align[i];
      if (f[i].size != size[i] || f[i].offset != offset) return false;
      offset += size[i];
    }
    return true;
  }
};

/* The parameters of `kernel` are, in order, the fields of LIST.  (Only
 * constant expressions: nothing of it reaches the code object.) */
#define CKJIT_ABI_KERNEL(kernel, LIST)                                      \
  static_assert(ckjit_abi_params<decltype(kernel)>::match({LIST(CKJIT_ABI_FIELD_ENTRY)}), \
                #kernel "'s parameters are not laid out as " #LIST)
#endif

#endif
