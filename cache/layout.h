/* Names inside a cache directory, shared by the writer, eviction, the
 * archive code and the tools:
 *
 *   <dir>/xx/<32 hex key>.ckjit                      an entry (xx = first two digits)
 *   <dir>/xx/.tmp-<32 hex>-<pid>-<tid hex>-<counter> a writer's temporary file
 *
 * Everything else in a cache directory is foreign and never touched. */
#ifndef CKJIT_CACHE_LAYOUT_H
#define CKJIT_CACHE_LAYOUT_H

#include <stddef.h>

#define CKJIT_CACHE_SUBDIRS 256 /* "00" .. "ff" */
#define CKJIT_CACHE_TEMP_PREFIX ".tmp-"

/* 1 when `name` is "xx" (two lowercase hex digits). */
int ckjit__cache_name_is_subdir(const char *name);
/* 1 when `name` is "<32 lowercase hex>.ckjit"; copies the hex into key_hex
 * (when not NULL). */
int ckjit__cache_name_is_entry(const char *name, char key_hex[33]);
/* 1 when `name` is a temporary file name of the writer (see above). */
int ckjit__cache_name_is_temp(const char *name);
/* Formats a temporary file name for the entry `hex`; unique per process,
 * thread and call. */
void ckjit__cache_temp_name(const char *hex, char *out, size_t len);

#endif
