/* Kernel resource use from NVIDIA cubins (.nv.info EIATTR records, section
 * sizes) and AMDGPU code objects (NT_AMDGPU_METADATA msgpack note), with
 * libelf (gelf) and msgpack-c.  See inspect_codeobj.h. */
#include "inspect_codeobj.h"

#include <gelf.h>
#include <libelf.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef EM_CUDA
#define EM_CUDA 190
#endif
#ifndef EM_AMDGPU
#define EM_AMDGPU 224
#endif
#define NT_AMDGPU_METADATA_ 32
#define STO_CUDA_ENTRY 0x10
#define SHT_CUDA_INFO 0x70000000u

/* .nv.info record formats and the attributes read here. */
enum { EIFMT_NVAL = 1, EIFMT_BVAL = 2, EIFMT_HVAL = 3, EIFMT_SVAL = 4 };
enum {
  EIATTR_MAX_THREADS = 0x05,
  EIATTR_REQNTID = 0x10,
  EIATTR_FRAME_SIZE = 0x11,
  EIATTR_MIN_STACK_SIZE = 0x12,
  EIATTR_CBANK_PARAM_SIZE = 0x19,
  EIATTR_MAXREG_COUNT = 0x1b,
  EIATTR_CRS_STACK_SIZE = 0x1e,
  EIATTR_MAX_STACK_SIZE = 0x23,
  EIATTR_REGCOUNT = 0x2f,
  EIATTR_NUM_BARRIERS = 0x4c,
};

#define BUNDLE_MAGIC "__CLANG_OFFLOAD_BUNDLE__"

static int fail(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
  return -1;
}

static void kernel_init(inspect_kernel *k, const char *name, inspect_vendor v) {
  memset(k, 0, sizeof *k);
  snprintf(k->name, sizeof k->name, "%s", name);
  k->vendor = v;
  int64_t *fields[] = {&k->max_threads, &k->lds_bytes,    &k->local_bytes,  &k->regs,
                       &k->reserved_smem, &k->min_stack,  &k->max_stack,    &k->crs_stack,
                       &k->spill_bytes, &k->max_regs,     &k->barriers,     &k->const0_bytes,
                       &k->param_bytes, &k->code_bytes,   &k->vgpr,         &k->agpr,
                       &k->sgpr,        &k->vgpr_spill,   &k->sgpr_spill,   &k->wavefront,
                       &k->kernarg_bytes};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) *fields[i] = -1;
  k->dynamic_stack = -1;
}

static int add_kernel(inspect_object *o, const char *name, inspect_vendor v) {
  inspect_kernel *ks = realloc(o->kernels, (o->n_kernels + 1) * sizeof *ks);
  if (!ks) return -1;
  o->kernels = ks;
  kernel_init(&ks[o->n_kernels], name, v);
  o->n_kernels++;
  return 0;
}

static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ---- NVIDIA ---------------------------------------------------------------- */

typedef struct cubin {
  Elf *elf;
  size_t shstrndx;
  Elf_Scn *symtab;
  size_t n_syms;
  size_t *kernel_of_sym; /* symbol index -> kernel index + 1, 0 = none */
  inspect_object *obj;
} cubin;

static const char *section_name(cubin *c, const GElf_Shdr *sh) {
  const char *n = elf_strptr(c->elf, c->shstrndx, sh->sh_name);
  return n ? n : "";
}

static inspect_kernel *kernel_named(cubin *c, const char *name) {
  for (size_t i = 0; i < c->obj->n_kernels; i++)
    if (!strcmp(c->obj->kernels[i].name, name)) return &c->obj->kernels[i];
  return NULL;
}

static inspect_kernel *kernel_of_sym(cubin *c, uint32_t sym) {
  if (sym >= c->n_syms || !c->kernel_of_sym[sym]) return NULL;
  return &c->obj->kernels[c->kernel_of_sym[sym] - 1];
}

/* Applies one .nv.info record.  `owner` is the kernel of a .nv.info.<k>
 * section (NULL for the global .nv.info). */
static void nv_attr(cubin *c, inspect_kernel *owner, int fmt, int attr, uint16_t word,
                    const unsigned char *data) {
  if (fmt == EIFMT_SVAL) {
    size_t size = word;
    /* Per-symbol records: a symbol index, then a 32-bit value. */
    if (size >= 8 && (attr == EIATTR_REGCOUNT || attr == EIATTR_FRAME_SIZE ||
                      attr == EIATTR_MIN_STACK_SIZE || attr == EIATTR_MAX_STACK_SIZE)) {
      inspect_kernel *k = kernel_of_sym(c, rd32(data));
      if (!k) return;
      int64_t v = rd32(data + 4);
      if (attr == EIATTR_REGCOUNT) k->regs = v;
      else if (attr == EIATTR_FRAME_SIZE) k->local_bytes = v;
      else if (attr == EIATTR_MIN_STACK_SIZE) k->min_stack = v;
      else k->max_stack = v;
      return;
    }
    if (!owner) return;
    if ((attr == EIATTR_MAX_THREADS || attr == EIATTR_REQNTID) && size >= 12) {
      int64_t n = (int64_t)rd32(data) * rd32(data + 4) * rd32(data + 8);
      /* REQNTID (an exact size) wins over MAX_THREADS (a bound). */
      if (attr == EIATTR_REQNTID || owner->max_threads < 0) owner->max_threads = n;
    } else if (attr == EIATTR_CRS_STACK_SIZE && size >= 4) {
      owner->crs_stack = rd32(data);
    }
    return;
  }
  if (!owner) return;
  int64_t v = fmt == EIFMT_BVAL ? (word & 0xff) : word;
  if (attr == EIATTR_CBANK_PARAM_SIZE) owner->param_bytes = v;
  else if (attr == EIATTR_MAXREG_COUNT) owner->max_regs = v;
  else if (attr == EIATTR_NUM_BARRIERS) owner->barriers = v;
}

static int nv_info_section(cubin *c, Elf_Scn *scn, inspect_kernel *owner, char *err, size_t len) {
  Elf_Data *d = elf_rawdata(scn, NULL);
  if (!d || !d->d_buf) return 0;
  const unsigned char *p = d->d_buf, *end = p + d->d_size;
  while (end - p >= 4) {
    int fmt = p[0], attr = p[1];
    uint16_t word = (uint16_t)(p[2] | p[3] << 8);
    p += 4;
    if (fmt == EIFMT_SVAL) {
      if ((size_t)(end - p) < word)
        return fail(err, len, "cubin: truncated .nv.info record (attribute 0x%02x)", attr);
      nv_attr(c, owner, fmt, attr, word, p);
      p += word;
    } else if (fmt >= EIFMT_NVAL && fmt <= EIFMT_HVAL) {
      nv_attr(c, owner, fmt, attr, word, NULL);
    } else {
      return fail(err, len, "cubin: unknown .nv.info record format %d", fmt);
    }
  }
  return 0;
}

static int read_cubin(Elf *e, const GElf_Ehdr *eh, inspect_object *o, char *err, size_t len) {
  cubin c;
  memset(&c, 0, sizeof c);
  c.elf = e;
  c.obj = o;
  o->vendor = INSPECT_NVIDIA;
  unsigned sm = eh->e_ident[EI_ABIVERSION] >= 8 ? (eh->e_flags >> 8) & 0xff : eh->e_flags & 0xff;
  snprintf(o->target, sizeof o->target, "sm_%u", sm);
  if (elf_getshdrstrndx(e, &c.shstrndx) != 0) return fail(err, len, "cubin: %s", elf_errmsg(-1));

  /* The symbol table: kernels are entry functions. */
  Elf_Scn *scn = NULL;
  GElf_Shdr sh;
  while ((scn = elf_nextscn(e, scn)))
    if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB) c.symtab = scn;
  if (!c.symtab) return fail(err, len, "cubin: no symbol table");
  gelf_getshdr(c.symtab, &sh);
  Elf_Data *syms = elf_getdata(c.symtab, NULL);
  size_t strtab = sh.sh_link;
  c.n_syms = syms && sh.sh_entsize ? syms->d_size / sh.sh_entsize : 0;
  c.kernel_of_sym = calloc(c.n_syms ? c.n_syms : 1, sizeof *c.kernel_of_sym);
  if (!c.kernel_of_sym) return fail(err, len, "out of memory");
  int64_t reserve = -1;
  int has_reserve = 0;
  for (size_t i = 0; i < c.n_syms; i++) {
    GElf_Sym s;
    if (!gelf_getsym(syms, (int)i, &s)) continue;
    const char *name = elf_strptr(e, strtab, s.st_name);
    if (!name) continue;
    if (!strcmp(name, ".nv.reservedSmem.cap")) reserve = (int64_t)s.st_value;
    if (!strncmp(name, ".nv.reservedSmem.", 17)) has_reserve = 1;
    if (GELF_ST_TYPE(s.st_info) != STT_FUNC || !(s.st_other & STO_CUDA_ENTRY)) continue;
    if (add_kernel(o, name, INSPECT_NVIDIA) != 0) {
      free(c.kernel_of_sym);
      return fail(err, len, "out of memory");
    }
    c.kernel_of_sym[i] = o->n_kernels;
  }
  if (reserve < 0) reserve = has_reserve ? 1024 : 0;

  /* Sections: records, then sizes. */
  int rc = 0;
  scn = NULL;
  while (rc == 0 && (scn = elf_nextscn(e, scn))) {
    if (!gelf_getshdr(scn, &sh)) continue;
    const char *name = section_name(&c, &sh);
    inspect_kernel *k;
    if (sh.sh_type == SHT_CUDA_INFO && !strcmp(name, ".nv.info")) {
      rc = nv_info_section(&c, scn, NULL, err, len);
    } else if (sh.sh_type == SHT_CUDA_INFO && !strncmp(name, ".nv.info.", 9)) {
      if ((k = kernel_named(&c, name + 9))) rc = nv_info_section(&c, scn, k, err, len);
    } else if (!strncmp(name, ".nv.shared.", 11) && (k = kernel_named(&c, name + 11))) {
      int64_t size = (int64_t)sh.sh_size;
      k->reserved_smem = has_reserve && size >= reserve ? reserve : 0;
      k->lds_bytes = size - k->reserved_smem;
    } else if (!strncmp(name, ".nv.constant0.", 14) && (k = kernel_named(&c, name + 14))) {
      k->const0_bytes = (int64_t)sh.sh_size;
    } else if (!strncmp(name, ".text.", 6) && (k = kernel_named(&c, name + 6))) {
      k->code_bytes = (int64_t)sh.sh_size;
      /* Before EIATTR_NUM_BARRIERS, the count sat in the flags (bits 20-26). */
      if (k->barriers < 0) k->barriers = (int64_t)((sh.sh_flags >> 20) & 0x7f);
      if (k->regs < 0 && (sh.sh_info >> 24)) k->regs = sh.sh_info >> 24; /* older cubins */
    }
  }
  for (size_t i = 0; i < o->n_kernels; i++) {
    inspect_kernel *k = &o->kernels[i];
    if (k->lds_bytes < 0) { /* no shared memory section: none used */
      k->lds_bytes = 0;
      k->reserved_smem = 0;
    }
    k->spill_bytes = k->local_bytes == 0 ? 0 : -1;
  }
  free(c.kernel_of_sym);
  return rc;
}

/* ---- AMD ------------------------------------------------------------------- */

static const msgpack_object *map_get(const msgpack_object *map, const char *key) {
  if (!map || map->type != MSGPACK_OBJECT_MAP) return NULL;
  size_t n = strlen(key);
  for (uint32_t i = 0; i < map->via.map.size; i++) {
    const msgpack_object *k = &map->via.map.ptr[i].key;
    if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n && !memcmp(k->via.str.ptr, key, n))
      return &map->via.map.ptr[i].val;
  }
  return NULL;
}

static int64_t map_int(const msgpack_object *map, const char *key) {
  const msgpack_object *v = map_get(map, key);
  if (!v) return -1;
  if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
    return v->via.u64 > INT64_MAX ? INT64_MAX : (int64_t)v->via.u64;
  if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) return v->via.i64;
  return -1;
}

static void map_str(const msgpack_object *map, const char *key, char *out, size_t len) {
  const msgpack_object *v = map_get(map, key);
  out[0] = '\0';
  if (!v || v->type != MSGPACK_OBJECT_STR) return;
  size_t n = v->via.str.size < len - 1 ? v->via.str.size : len - 1;
  memcpy(out, v->via.str.ptr, n);
  out[n] = '\0';
}

static int amd_metadata(const char *desc, size_t size, inspect_object *o, char *err, size_t len) {
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  size_t off = 0;
  int rc = 0;
  if (msgpack_unpack_next(&u, desc, size, &off) != MSGPACK_UNPACK_SUCCESS ||
      u.data.type != MSGPACK_OBJECT_MAP) {
    rc = fail(err, len, "AMDGPU metadata: not a msgpack map");
    goto out;
  }
  char target[96];
  map_str(&u.data, "amdhsa.target", target, sizeof target);
  const char *gfx = strstr(target, "--");
  snprintf(o->target, sizeof o->target, "%s", gfx ? gfx + 2 : target);
  const msgpack_object *ks = map_get(&u.data, "amdhsa.kernels");
  if (!ks || ks->type != MSGPACK_OBJECT_ARRAY) {
    rc = fail(err, len, "AMDGPU metadata: no amdhsa.kernels array");
    goto out;
  }
  for (uint32_t i = 0; i < ks->via.array.size; i++) {
    const msgpack_object *m = &ks->via.array.ptr[i];
    if (m->type != MSGPACK_OBJECT_MAP) continue;
    char name[128];
    map_str(m, ".name", name, sizeof name);
    if (add_kernel(o, name, INSPECT_AMD) != 0) {
      rc = fail(err, len, "out of memory");
      goto out;
    }
    inspect_kernel *k = &o->kernels[o->n_kernels - 1];
    k->vgpr = map_int(m, ".vgpr_count");
    k->agpr = map_int(m, ".agpr_count");
    k->sgpr = map_int(m, ".sgpr_count");
    k->vgpr_spill = map_int(m, ".vgpr_spill_count");
    k->sgpr_spill = map_int(m, ".sgpr_spill_count");
    k->lds_bytes = map_int(m, ".group_segment_fixed_size");
    k->local_bytes = map_int(m, ".private_segment_fixed_size");
    k->max_threads = map_int(m, ".max_flat_workgroup_size");
    k->wavefront = map_int(m, ".wavefront_size");
    k->kernarg_bytes = map_int(m, ".kernarg_segment_size");
    const msgpack_object *reqd = map_get(m, ".reqd_workgroup_size");
    if (reqd && reqd->type == MSGPACK_OBJECT_ARRAY && reqd->via.array.size == 3) {
      int64_t n = 1;
      for (int d = 0; d < 3; d++) {
        const msgpack_object *x = &reqd->via.array.ptr[d];
        n *= x->type == MSGPACK_OBJECT_POSITIVE_INTEGER && x->via.u64 <= 1024 ? (int64_t)x->via.u64 : 0;
      }
      if (n > 0) k->max_threads = n;
    }
    const msgpack_object *dyn = map_get(m, ".uses_dynamic_stack");
    if (dyn && dyn->type == MSGPACK_OBJECT_BOOLEAN) k->dynamic_stack = dyn->via.boolean;
  }
out:
  msgpack_unpacked_destroy(&u);
  return rc;
}

static int read_amdgpu(Elf *e, inspect_object *o, char *err, size_t len) {
  o->vendor = INSPECT_AMD;
  Elf_Scn *scn = NULL;
  GElf_Shdr sh;
  while ((scn = elf_nextscn(e, scn))) {
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE) continue;
    Elf_Data *d = elf_getdata(scn, NULL);
    if (!d || !d->d_buf) continue;
    size_t off = 0, next, name_off, desc_off;
    GElf_Nhdr nh;
    while (off < d->d_size && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
      const char *name = (const char *)d->d_buf + name_off;
      if (nh.n_type == NT_AMDGPU_METADATA_ && nh.n_namesz == 7 && !memcmp(name, "AMDGPU", 7))
        return amd_metadata((const char *)d->d_buf + desc_off, nh.n_descsz, o, err, len);
      off = next;
    }
  }
  return fail(err, len, "AMDGPU code object without an NT_AMDGPU_METADATA note (code object v3+ "
                        "expected)");
}

/* The AMDGPU code object inside an uncompressed clang offload bundle. */
static int unbundle(const unsigned char *b, size_t size, const unsigned char **obj,
                    size_t *obj_size, char *err, size_t len) {
  size_t m = strlen(BUNDLE_MAGIC);
  if (size < m + 8) return fail(err, len, "truncated offload bundle");
  uint64_t n = rd64(b + m);
  size_t p = m + 8;
  for (uint64_t i = 0; i < n; i++) {
    if (size - p < 24) return fail(err, len, "truncated offload bundle entry");
    uint64_t off = rd64(b + p), sz = rd64(b + p + 8), id_len = rd64(b + p + 16);
    p += 24;
    if (id_len > size - p) return fail(err, len, "truncated offload bundle id");
    int amd = id_len >= 6 && memmem(b + p, (size_t)id_len, "amdgcn", 6) != NULL;
    p += (size_t)id_len;
    if (amd && sz > 0) {
      if (off > size || sz > size - off) return fail(err, len, "offload bundle entry out of range");
      *obj = b + off;
      *obj_size = (size_t)sz;
      return 0;
    }
  }
  return fail(err, len, "offload bundle without an amdgcn code object");
}

/* ---- entry point ----------------------------------------------------------- */

int inspect_code_object(const void *buf, size_t size, inspect_object *out, char *err,
                        size_t err_len) {
  memset(out, 0, sizeof *out);
  const unsigned char *b = buf;
  size_t m = strlen(BUNDLE_MAGIC);
  if (size >= m && !memcmp(b, BUNDLE_MAGIC, m)) {
    if (unbundle(b, size, &b, &size, err, err_len) != 0) return -1;
  } else if (size >= 4 && !memcmp(b, "CCOB", 4)) {
    return fail(err, err_len, "compressed offload bundles are not supported");
  }
  if (size < EI_NIDENT || memcmp(b, ELFMAG, SELFMAG))
    return fail(err, err_len, "not an ELF code object (%zu bytes)", size);
  if (elf_version(EV_CURRENT) == EV_NONE) return fail(err, err_len, "libelf: %s", elf_errmsg(-1));
  /* libelf wants a writable image; it is only read (ELF_C_READ_MMAP-like). */
  char *copy = malloc(size);
  if (!copy) return fail(err, err_len, "out of memory");
  memcpy(copy, b, size);
  Elf *e = elf_memory(copy, size);
  int rc;
  GElf_Ehdr eh;
  if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh)) {
    int elf_err = elf_errno(); /* 0 ("no error") when libelf just did not take it as ELF */
    rc = fail(err, err_len, "not an ELF object: %s",
              elf_err ? elf_errmsg(elf_err) : "libelf cannot read it");
  } else if (eh.e_machine == EM_CUDA) {
    rc = read_cubin(e, &eh, out, err, err_len);
  } else if (eh.e_machine == EM_AMDGPU) {
    rc = read_amdgpu(e, out, err, err_len);
  } else {
    rc = fail(err, err_len, "ELF for machine %u: neither a cubin (EM_CUDA) nor AMDGPU", eh.e_machine);
  }
  if (e) elf_end(e);
  free(copy);
  if (rc != 0) inspect_object_free(out);
  return rc;
}

void inspect_object_free(inspect_object *obj) {
  free(obj->kernels);
  obj->kernels = NULL;
  obj->n_kernels = 0;
}
