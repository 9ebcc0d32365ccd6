/* ckjit and the AMD comgr cache.
 *
 * hipRTC on ROCm 6+ compiles through comgr, which keeps a cache of its own
 * (AMD_COMGR_CACHE, AMD_COMGR_CACHE_DIR, default $XDG_CACHE_HOME/comgr,
 * pruned to 30 GB by default at process exit).  ckjit's cache is the one
 * source of truth: it is keyed on every compile input, verified, bounded
 * and shipped as layers; a comgr cache under it would duplicate each code
 * object in a second, unbounded-by-ckjit place (and defeat
 * CKJIT_CACHE_DISABLE=1, used to force fresh compiles). */
#ifndef CKJIT_CACHE_COMGR_POLICY_H
#define CKJIT_CACHE_COMGR_POLICY_H

/* Sets AMD_COMGR_CACHE=0 in the environment unless the user already set
 * AMD_COMGR_CACHE (to anything): the user's choice always wins.  Must run
 * before hipRTC/comgr is first loaded (comgr reads the variable once, on
 * first use).  Idempotent and thread-safe among its callers (setenv itself
 * is not safe against other threads calling setenv at the same time). */
void ckjit__comgr_cache_policy(void);

#endif
