/* Payload sanity: the code object of a cache entry must be what its header
 * says it is.
 *
 * An entry's checksums prove that its bytes are the ones written; they do
 * not prove that those bytes are code for the entry's arch (whoever can write
 * an entry can also compute checksums).  So before a payload is used, stored,
 * imported or counted as good by `ckjit-cache verify`, it must be:
 *
 *  - not empty, and a 64-bit little-endian ELF object (a clang offload bundle
 *    holding one is unwrapped: some hipRTC versions return those);
 *  - for the entry's vendor: e_machine EM_CUDA (190) for an NVIDIA arch
 *    (sm_*), EM_AMDGPU (224) for an AMD one (gfx*);
 *  - for AMD, for the entry's processor: the EF_AMDGPU_MACH bits of e_flags
 *    (0x3f for gfx90a, ...).  A processor missing from the table here is
 *    checked by e_machine only, so that a new arch never makes its own
 *    entries unloadable (a cache that rejects what it just stored would
 *    recompile forever);
 *  - defining the entry's kernel: a function symbol of that name, in the
 *    symbol table or the dynamic one.
 *
 * This is a sanity check against planted or mixed-up files, not a proof that
 * the code is harmless: a forger who can write the cache directory can also
 * write a valid ELF (that is why the directory's owner and modes are checked,
 * cache/entry_accept.h).  It costs a few microseconds per load from disk. */
#ifndef CKJIT_CACHE_PAYLOAD_CHECK_H
#define CKJIT_CACHE_PAYLOAD_CHECK_H

#include <stddef.h>

#include "entry.h"

/* 0 when `payload` (`size` bytes) is a code object for meta->arch that
 * defines meta->kernel; -1 otherwise, with *why set to a reason that starts
 * with "not an ELF object" when it is not ELF at all (the text lives in
 * thread-local storage until the next call on this thread). */
int ckjit__entry_accept_payload(const ckjit_entry_meta *meta, const void *payload, size_t size,
                                const char **why);

/* libelf set up for this process (elf_version, once): every libelf user
 * asks this first.  0 when the library refuses the version. */
int ckjit__libelf_ready(void);

/* The EF_AMDGPU_MACH value of an AMD processor ("gfx90a" or "gfx90a:xnack-";
 * 0x3f), or -1 when the table has none. */
int ckjit__amdgpu_mach(const char *arch);

#endif
