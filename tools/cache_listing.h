/* Listing the on-disk cache: walks <dir>/xx/ (two lowercase hex digits) and
 * classifies every name by the cache's own naming (cache/layout.h), without ever following a
 * symbolic link (lstat/fstatat with AT_SYMLINK_NOFOLLOW, O_NOFOLLOW opens
 * relative to directory descriptors).  Subdirectories and entries are judged
 * by the library's own acceptance rule (cache/entry_accept.h), so what the
 * listing calls good the library uses and what it calls bad the library
 * refuses.  Shared by ckjit-cache and ckjit-demo. */
#ifndef CKJIT_TOOLS_CACHE_LISTING_H
#define CKJIT_TOOLS_CACHE_LISTING_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json_writer.h"

typedef enum cache_item_kind {
  CACHE_ITEM_ENTRY = 0,  /* xx/<32 hex>.ckjit */
  CACHE_ITEM_TEMP = 1,   /* xx/.tmp-<key>-<pid>-<tid>-<n>: the writer's temporary file */
  CACHE_ITEM_SUBDIR = 2, /* an "xx" name in the root that the rule refuses (listed only then) */
  CACHE_ITEM_FOREIGN = 3 /* anything else: never modified by the tools */
} cache_item_kind;

typedef struct cache_item {
  cache_item_kind kind;
  char subdir[3];  /* "xx", or "" for a name in the cache root */
  char name[256];
  char type;       /* 'f' regular file, 'l' symlink, 'd' directory, '?' other */
  uint64_t size;   /* st_size (of the link itself for a symlink) */
  int64_t mtime;   /* seconds since the epoch (an entry's last use) */
  int64_t btime;   /* entries: creation (statx birth time), 0 when unknown */
  uint64_t dev, ino; /* identity when listed (checked again before removal) */
  int bad;         /* fails verification; `why` says why */
  int refusal;     /* with bad: a ckjit_refusal (cache/entry_accept.h), how to repair it */
  char why[160];
  /* Entries only: */
  char key[33];    /* from the file name */
  int decoded;     /* the header was read and verified */
  char arch[64];   /* from the header, when decoded */
  char kernel[64];
  char spec[256];  /* canonical spec text from the header ("" if none) */
  char op[64];     /* short form of the spec: "elementwise gelu_tanh bf16" */
  uint64_t payload_size;
} cache_item;

typedef struct cache_listing {
  char dir[1024];
  int exists;           /* 0 when the directory does not exist (empty listing) */
  cache_item *items;    /* sorted by subdir, then name */
  size_t count, cap;
  size_t entries;       /* entry-named regular files (good or bad) */
  size_t temps;
  size_t foreign;
  size_t bad;           /* items with bad set */
  uint64_t entry_bytes; /* st_size summed over those */
  uint64_t temp_bytes;
} cache_listing;

/* 1 when `name` is "xx" (two lowercase hex digits). */
int cache_name_is_subdir(const char *name);
/* 1 when `name` is "<32 lowercase hex>.ckjit"; copies the hex into key_hex. */
int cache_name_is_entry(const char *name, char key_hex[33]);
/* 1 when `name` is a temporary file name of the cache's writer. */
int cache_name_is_temp(const char *name);

/* Walks `dir`.  Every "xx" name must be a subdirectory that passes rule 1
 * of cache/entry_accept.h (anything else there is a bad CACHE_ITEM_SUBDIR),
 * and every entry name must hold a regular file; with `decode`, every entry
 * is also read and checked by the library's own ckjit__entry_read_at
 * (owner, mode, size, checksums, the key of its name, its payload), and must
 * lie in the subdirectory its key names.  Symbolic links anywhere in the
 * cache are reported as bad.  Returns 0 (also when `dir` does not exist:
 * exists = 0), or -1 with a message in `err` (not a directory, a symlink,
 * unreadable, out of memory). */
int cache_listing_read(cache_listing *l, const char *dir, int decode, char *err, size_t errlen);
void cache_listing_free(cache_listing *l);

/* "4.2 KiB", "17 B". */
void cache_format_size(uint64_t bytes, char *buf, size_t len);
/* "12s", "5m", "3h", "2d" (negative ages, from clock skew, print as "0s"). */
void cache_format_age(int64_t seconds, char *buf, size_t len);

/* One line per entry-named item: key, kernel, arch, size, age (since the
 * file was created, "-" when the file system does not record it), last use
 * (its mtime); bad ones are marked with why.  `now` is time(NULL). */
void cache_listing_print_entries(FILE *out, const cache_listing *l, int64_t now);
/* The same as a JSON array member named `key`. */
void cache_listing_json_entries(json_writer *w, const char *key, const cache_listing *l,
                                int64_t now);
/* The members describing one item (any kind), inside an object the caller
 * opens and closes (so it can add its own members). */
void cache_listing_json_item_fields(json_writer *w, const cache_item *it, int64_t now);

/* "xx/name" (or "name" for a root item) into buf. */
void cache_item_path(const cache_item *it, char *buf, size_t len);

#endif
