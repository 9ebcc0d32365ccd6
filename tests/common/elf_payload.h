/* Test payloads that pass the cache's payload check (cache/payload_check.h):
 * the smallest honest 64-bit little-endian ELF object that defines one
 * function symbol, for an arch's vendor and processor, followed by filler
 * bytes up to the size a test asks for.  Also the parts to build wrong ones
 * (another machine, another AMD processor, no such symbol). */
#ifndef CKJIT_TESTS_ELF_PAYLOAD_H
#define CKJIT_TESTS_ELF_PAYLOAD_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cache/payload_check.h"
#include "test_util.h"

#ifndef EM_CUDA
#define EM_CUDA 190
#endif
#ifndef EM_AMDGPU
#define EM_AMDGPU 224
#endif

/* Layout: the ELF header, a symbol table (the null symbol and `symbol`), its
 * string table, the three section headers (null, .symtab, .strtab), then
 * filler.  The symbol is a global function at an absolute address (defined,
 * no code needed). */
static TU_UNUSED size_t ep_min_size(const char *symbol) {
  size_t strtab = strlen(symbol) + 2;
  size_t shoff = (sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Sym) + strtab + 7) & ~(size_t)7;
  return shoff + 3 * sizeof(Elf64_Shdr);
}

/* Writes the object into `out` (room for max(size, ep_min_size(symbol))
 * bytes) and returns its size: `size`, or the minimum when `size` is
 * smaller.  Filler bytes come from `seed`. */
static TU_UNUSED size_t ep_build_raw(uint8_t *out, size_t size, uint16_t machine, uint32_t flags,
                                     const char *symbol, uint64_t seed) {
  size_t min = ep_min_size(symbol), n = size > min ? size : min;
  size_t strtab_off = sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Sym), strtab = strlen(symbol) + 2;
  size_t shoff = min - 3 * sizeof(Elf64_Shdr);
  memset(out, 0, min);
  Elf64_Ehdr eh;
  memset(&eh, 0, sizeof eh);
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_REL;
  eh.e_machine = machine;
  eh.e_version = EV_CURRENT;
  eh.e_shoff = shoff;
  eh.e_flags = flags;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 3;
  memcpy(out, &eh, sizeof eh);
  Elf64_Sym sym;
  memset(&sym, 0, sizeof sym);
  sym.st_name = 1;
  sym.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
  sym.st_shndx = SHN_ABS;
  memcpy(out + sizeof(Elf64_Ehdr) + sizeof(Elf64_Sym), &sym, sizeof sym);
  memcpy(out + strtab_off + 1, symbol, strlen(symbol));
  Elf64_Shdr sh[3];
  memset(sh, 0, sizeof sh);
  sh[1].sh_type = SHT_SYMTAB;
  sh[1].sh_offset = sizeof(Elf64_Ehdr);
  sh[1].sh_size = 2 * sizeof(Elf64_Sym);
  sh[1].sh_link = 2;
  sh[1].sh_info = 1;
  sh[1].sh_addralign = 8;
  sh[1].sh_entsize = sizeof(Elf64_Sym);
  sh[2].sh_type = SHT_STRTAB;
  sh[2].sh_offset = strtab_off;
  sh[2].sh_size = strtab;
  sh[2].sh_addralign = 1;
  memcpy(out + shoff, sh, sizeof sh);
  tu_rng r = {seed * 2654435761u + 11u};
  for (size_t i = min; i < n; i++) out[i] = (uint8_t)tu_rng_next(&r);
  return n;
}

/* The machine and flags a payload for `arch` must have. */
static TU_UNUSED void ep_machine_of(const char *arch, uint16_t *machine, uint32_t *flags) {
  int amd = !strncmp(arch, "gfx", 3);
  int mach = amd ? ckjit__amdgpu_mach(arch) : -1;
  *machine = amd ? EM_AMDGPU : EM_CUDA;
  *flags = mach >= 0 ? (uint32_t)mach : 0;
}

/* A payload that passes the check for (arch, kernel). */
static TU_UNUSED size_t ep_build(uint8_t *out, size_t size, const char *arch, const char *kernel,
                                 uint64_t seed) {
  uint16_t machine;
  uint32_t flags;
  ep_machine_of(arch, &machine, &flags);
  return ep_build_raw(out, size, machine, flags, kernel, seed);
}

#endif
