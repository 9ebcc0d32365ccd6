/* Payload sanity (see payload_check.h): ELF class, vendor, AMD processor and
 * the kernel's symbol, read with libelf. */
#include "payload_check.h"

#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "byte_order.h"

#ifndef EM_CUDA
#define EM_CUDA 190
#endif
#ifndef EM_AMDGPU
#define EM_AMDGPU 224
#endif
#define AMDGPU_MACH_MASK 0xffu /* EF_AMDGPU_MACH */
#define OFFLOAD_BUNDLE_MAGIC "__CLANG_OFFLOAD_BUNDLE__"

/* EF_AMDGPU_MACH_AMDGCN_* of LLVM's ELF.h (AMDGPU's ELF ABI).  Every AMD
 * processor runtime/arch.c accepts is here; a test checks the ones hipRTC
 * can build against its own output. */
typedef struct amdgpu_mach {
  const char *processor;
  unsigned mach;
} amdgpu_mach;

static const amdgpu_mach amdgpu_machs[] = {
    {"gfx600", 0x20},  {"gfx601", 0x21},  {"gfx602", 0x3a},  {"gfx700", 0x22},
    {"gfx701", 0x23},  {"gfx702", 0x24},  {"gfx703", 0x25},  {"gfx704", 0x26},
    {"gfx705", 0x3b},  {"gfx801", 0x28},  {"gfx802", 0x29},  {"gfx803", 0x2a},
    {"gfx805", 0x3c},  {"gfx810", 0x2b},  {"gfx900", 0x2c},  {"gfx902", 0x2d},
    {"gfx904", 0x2e},  {"gfx906", 0x2f},  {"gfx908", 0x30},  {"gfx909", 0x31},
    {"gfx90a", 0x3f},  {"gfx90c", 0x32},  {"gfx940", 0x40},  {"gfx941", 0x4b},
    {"gfx942", 0x4c},  {"gfx950", 0x4f},  {"gfx1010", 0x33}, {"gfx1011", 0x34},
    {"gfx1012", 0x35}, {"gfx1013", 0x42}, {"gfx1030", 0x36}, {"gfx1031", 0x37},
    {"gfx1032", 0x38}, {"gfx1033", 0x39}, {"gfx1034", 0x3e}, {"gfx1035", 0x3d},
    {"gfx1036", 0x45}, {"gfx1100", 0x41}, {"gfx1101", 0x46}, {"gfx1102", 0x47},
    {"gfx1103", 0x44}, {"gfx1150", 0x43}, {"gfx1151", 0x4a}, {"gfx1200", 0x48},
    {"gfx1201", 0x4e},
};

int ckjit__amdgpu_mach(const char *arch) {
  size_t len = strcspn(arch, ":");
  for (size_t i = 0; i < sizeof amdgpu_machs / sizeof amdgpu_machs[0]; i++)
    if (strlen(amdgpu_machs[i].processor) == len && !strncmp(arch, amdgpu_machs[i].processor, len))
      return (int)amdgpu_machs[i].mach;
  return -1;
}

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;
static int elf_ready;
static void elf_init(void) { elf_ready = elf_version(EV_CURRENT) != EV_NONE; }

int ckjit__libelf_ready(void) {
  pthread_once(&elf_once, elf_init);
  return elf_ready;
}

static _Thread_local char reason[200];

static int refuse(const char **why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(const char **why, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
  *why = reason;
  return -1;
}

/* The AMDGPU code object inside an (uncompressed) clang offload bundle:
 * magic, entry count, then per entry offset, size, id length and id. */
static int unbundle(const uint8_t **p, size_t *size) {
  const uint8_t *b = *p;
  size_t n = *size, at = sizeof OFFLOAD_BUNDLE_MAGIC - 1;
  if (n < at + 8) return -1;
  uint64_t entries = ckjit__get_u64(b + at);
  at += 8;
  for (uint64_t i = 0; i < entries; i++) {
    if (n - at < 24) return -1;
    uint64_t off = ckjit__get_u64(b + at), len = ckjit__get_u64(b + at + 8);
    uint64_t id_len = ckjit__get_u64(b + at + 16);
    at += 24;
    if (id_len > n - at) return -1;
    int amdgcn = id_len >= 6 && memmem(b + at, (size_t)id_len, "amdgcn", 6) != NULL;
    at += (size_t)id_len;
    if (amdgcn && len > 0) {
      if (off > n || len > n - off) return -1;
      *p = b + off;
      *size = (size_t)len;
      return 0;
    }
  }
  return -1;
}

/* 1 when a symbol table of `e` defines the function `name`. */
static int defines_function(Elf *e, const char *name) {
  Elf_Scn *scn = NULL;
  GElf_Shdr sh;
  while ((scn = elf_nextscn(e, scn))) {
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
        !sh.sh_entsize)
      continue;
    Elf_Data *d = elf_getdata(scn, NULL);
    size_t count = d ? d->d_size / sh.sh_entsize : 0;
    for (size_t i = 1; i < count; i++) {
      GElf_Sym s;
      if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
          s.st_shndx == SHN_UNDEF)
        continue;
      const char *sym = elf_strptr(e, sh.sh_link, s.st_name);
      if (sym && !strcmp(sym, name)) return 1;
    }
  }
  return 0;
}

int ckjit__entry_accept_payload(const ckjit_entry_meta *meta, const void *payload, size_t size,
                                const char **why) {
  int nvidia = !strncmp(meta->arch, "sm_", 3), amd = !strncmp(meta->arch, "gfx", 3);
  if (!nvidia && !amd) return refuse(why, "arch '%.64s' is neither NVIDIA nor AMD", meta->arch);
  if (!size) return refuse(why, "not an ELF object: the payload is empty");
  const uint8_t *b = payload;
  size_t n = size;
  size_t magic = sizeof OFFLOAD_BUNDLE_MAGIC - 1;
  if (amd && n >= magic && !memcmp(b, OFFLOAD_BUNDLE_MAGIC, magic) && unbundle(&b, &n) != 0)
    return refuse(why, "not an ELF object: an offload bundle without a valid amdgcn code object");
  if (n < sizeof(Elf64_Ehdr) || memcmp(b, ELFMAG, SELFMAG))
    return refuse(why, "not an ELF object (%zu bytes that do not start with the ELF magic)", size);
  /* GPU code objects are 64-bit little-endian.  Refusing anything else also
   * means that libelf never converts the image (it only reads it). */
  if ((b[EI_CLASS] != ELFCLASS32 && b[EI_CLASS] != ELFCLASS64) ||
      (b[EI_DATA] != ELFDATA2LSB && b[EI_DATA] != ELFDATA2MSB))
    return refuse(why, "not an ELF object: invalid class or byte order");
  if (b[EI_CLASS] != ELFCLASS64 || b[EI_DATA] != ELFDATA2LSB)
    return refuse(why, "not a 64-bit little-endian ELF object (GPU code objects are)");
  if (!ckjit__libelf_ready()) return refuse(why, "libelf is unusable (version mismatch)");
  Elf *e = elf_memory((char *)(uintptr_t)b, n); /* read only: ELF_C_READ_MMAP */
  GElf_Ehdr eh;
  int rc = 0;
  if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh)) {
    int err = elf_errno();
    rc = refuse(why, "not an ELF object: %s", err ? elf_errmsg(err) : "libelf cannot read it");
  } else if (eh.e_machine != (nvidia ? EM_CUDA : EM_AMDGPU)) {
    rc = refuse(why, "ELF object for machine %u, not %s (%u) as arch %.64s needs", eh.e_machine,
                nvidia ? "EM_CUDA" : "EM_AMDGPU", nvidia ? EM_CUDA : EM_AMDGPU, meta->arch);
  } else if (amd && ckjit__amdgpu_mach(meta->arch) >= 0 &&
             (eh.e_flags & AMDGPU_MACH_MASK) != (unsigned)ckjit__amdgpu_mach(meta->arch)) {
    rc = refuse(why, "AMDGPU code object for processor mach 0x%x, not 0x%x (%.*s)",
                (unsigned)(eh.e_flags & AMDGPU_MACH_MASK), (unsigned)ckjit__amdgpu_mach(meta->arch),
                (int)strcspn(meta->arch, ":"), meta->arch);
  } else if (!defines_function(e, meta->kernel)) {
    rc = refuse(why, "code object defines no function '%.64s' (the entry's kernel)", meta->kernel);
  }
  if (e) elf_end(e);
  return rc;
}
