/* THE rule a cache entry must pass to be used.  One copy, shared by every
 * reader: the library's lookups (cache/disk_cache.c, writable cache and
 * read-only layers alike), `ckjit-cache verify` (tools/cache_listing.c),
 * export and import (cache/archive.c), and ckjit-inspect for the bytes and
 * payload part.  Whatever one of them accepts, all of them accept.
 *
 * For <root>/xx/<32 hex key>.ckjit:
 *
 *  1. xx is a real directory (never followed through a symbolic link), not
 *     writable by group or others, owned by a trusted user;
 *  2. the entry is a regular file (never a link, FIFO, directory...), not
 *     writable by group or others, owned by a trusted user, at most
 *     CKJIT_ENTRY_MAX_FILE bytes;
 *  3. its bytes decode (cache/entry.h: magic, version, sizes, both
 *     checksums) under the key its name says;
 *  4. its payload is a code object for the entry's arch that defines the
 *     entry's kernel (cache/payload_check.h).
 *
 * Trusted users are the owner of the cache directory `root` (listing a
 * directory trusts its owner), root, and this process's effective user.
 * Why owners matter as much as modes: the owner of a file or directory can
 * rewrite it whatever its mode, and a checksum only guards against
 * corruption, not forgery.  They are also what makes it safe to repair a
 * group-writable subdirectory by tightening its mode: whatever others
 * planted in it while it was open is theirs, so rule 2 refuses it. */
#ifndef CKJIT_CACHE_ENTRY_ACCEPT_H
#define CKJIT_CACHE_ENTRY_ACCEPT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "entry.h"

/* The largest entry file: the payload limit and the largest header. */
#define CKJIT_ENTRY_MAX_FILE ((uint64_t)CKJIT_ENTRY_MAX_PAYLOAD + 4096u)

/* What an item fails, which decides how it can be repaired. */
typedef enum ckjit_refusal {
  CKJIT_REFUSAL_NONE = 0,
  CKJIT_REFUSAL_TYPE,    /* a symlink, or not a directory / not a regular file */
  CKJIT_REFUSAL_MODE,    /* writable by group or others (its owner can chmod go-w) */
  CKJIT_REFUSAL_OWNER,   /* owned by an untrusted user */
  CKJIT_REFUSAL_CONTENT, /* unreadable, too large, does not decode, another key, bad payload */
} ckjit_refusal;

/* Rule 1, on the stat of a subdirectory taken without following a link
 * (fstat of an O_NOFOLLOW descriptor, or fstatat AT_SYMLINK_NOFOLLOW).
 * `root_owner` is the owner of the cache directory.  *why is static text. */
ckjit_refusal ckjit__subdir_check(const struct stat *st, uid_t root_owner, const char **why);

/* Rule 2's type, mode and owner part, on the stat of an entry file taken the
 * same way.  *why is static text. */
ckjit_refusal ckjit__entry_file_check(const struct stat *st, uid_t root_owner, const char **why);

/* Rules 3 and 4 on an entry's bytes (`expect`: the key it must hold, or
 * NULL).  0 with the header in *meta and the payload located (each output
 * may be NULL), or -1 with *why set (static or thread-local text).  This is
 * what import checks an archive's records with. */
int ckjit__entry_accept_bytes(const uint8_t *buf, size_t size, const ckjit_key *expect,
                              ckjit_entry_meta *meta, const uint8_t **payload,
                              size_t *payload_size, const char **why);

/* The result of ckjit__entry_read_at. */
typedef struct ckjit_entry_read {
  uint8_t *file;     /* the whole file (malloc'ed) when accepted, else NULL */
  size_t file_size;
  size_t payload_offset, payload_size;
  ckjit_entry_meta meta;
  int opened;        /* st is the entry file's (it could be opened) */
  struct stat st;
  ckjit_refusal refusal;
  const char *why;   /* when refused (thread-local text, valid until the next call) */
} ckjit_entry_read;

/* Rules 2 to 4 on the entry `name` of the subdirectory `dir_fd` (rule 1 is
 * the caller's, once per directory): opens it without following a link or
 * blocking on a FIFO, checks it, reads it whole and decodes it.  With
 * `touch`, an accepted entry's mtime is set to now unless already recent
 * (CKJIT_DISK_TOUCH_GRANULARITY_S; the mtime is its last use).  Returns 1
 * accepted, 0 no such entry, -1 refused. */
int ckjit__entry_read_at(int dir_fd, const char *name, const ckjit_key *expect, uid_t root_owner,
                         int touch, ckjit_entry_read *out);

#endif
