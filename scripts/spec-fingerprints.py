#!/usr/bin/env python3
"""Fingerprints of every default specialization: rendered source and code object.

usage: spec-fingerprints.py BUILD_DIR [-o FILE] [--compare BASELINE]
                            [--input FILE] [--arch LIST] [-j N] [--keep DIR]

For each (arch, spec) pair that `ckjit-prewarm --all --list --arch LIST`
prints (default archs: sm_90,gfx90a) it records one line

    ARCH SPEC SOURCE_SHA256 CODE_SHA256 CODE_SIZE

SOURCE_SHA256 is the SHA-256 of the kernel source after the template renderer
(the `.cu` file CKJIT_DUMP_DIR writes for each compile); CODE_SHA256 and
CODE_SIZE are those of the compiled code object (NVRTC cubin, hipRTC code
object): the payload of the pair's cache entry, read back from the entry file
(layout in cache/entry.h).  The source hash covers the rendered template
only, not the kernel_src/ headers it includes (embedded as they are); the
code hash covers what they compile to.  Lines are keyed by (arch, canonical spec), never
by cache key: the key covers the library version and the source, so it
changes whenever anything does.  A pair whose compiler is not on this host
(CKJIT_ERROR_BACKEND_UNAVAILABLE, e.g. no hipRTC) gets `skipped` in its three
value fields; it is not a failure.

Everything is compiled afresh with BUILD_DIR/tools/ckjit-prewarm into an
empty temporary cache directory (`-j N`, default: the number of CPUs), with
the cache's size bounds and read-only layers turned off so that every pair is
compiled and stays on disk.  Only the built tools are used.

  -o FILE            write the fingerprints there (default: stdout, unless
                     --compare is given)
  --compare BASELINE compare with a fingerprint file written earlier: prints
                     how many pairs are identical in source and in code, each
                     pair that differs and each pair present on one side only;
                     exit status 1 on any difference
  --input FILE       with --compare: take the current fingerprints from FILE
                     instead of compiling
  --keep DIR         keep the cache and the dumps in DIR (must not exist)
  --family LIST      only the pairs of these kernel families (comma-separated)
  --code-only        with --compare: count only code differences (and pairs on
                     one side only); pairs whose rendered source alone differs
                     are summed up in one line (-v lists them)

Exit status: 0 success (and, with --compare, no difference), 1 a difference or
a pair that failed to compile, 2 usage or tool errors, or a comparison in
which every pair was skipped.  This is the byte check of issue 16 (a
structure-only refactor): record a baseline before, compare after.
bench/spec-fingerprints.txt is the baseline at 2d2fee9, before the refactor
(NVRTC 13.0, hipRTC 5.2.3: code hashes depend on the compiler versions).
"""
import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

MAGIC = b"CKJITBIN"
FIXED = 56  # cache/entry.h: fixed part of the header
SKIPPED = "skipped"
UNAVAILABLE = "CKJIT_ERROR_BACKEND_UNAVAILABLE"
FORMAT_LINE = "# ckjit spec fingerprints 1: arch spec source_sha256 code_sha256 code_size"


def die(msg):
    print("spec-fingerprints: " + msg, file=sys.stderr)
    sys.exit(2)


def read_entry(path):
    """Header fields and payload of a cache entry (format of cache/entry.h).

    The checksums are XXH3 (not in the standard library); the prewarm tool
    has just written and verified the entry, so only the layout is checked."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < FIXED + 8 or data[:8] != MAGIC:
        raise ValueError("%s: not a ckjit cache entry" % path)
    version, header_size = struct.unpack_from("<II", data, 8)
    payload_size, = struct.unpack_from("<Q", data, 32)
    arch_len, kernel_len, spec_len = struct.unpack_from("<HHH", data, 48)
    if version != 2:
        raise ValueError("%s: entry format version %d, this script reads 2" % (path, version))
    if header_size != FIXED + arch_len + kernel_len + spec_len + 8:
        raise ValueError("%s: header size %d does not match its fields" % (path, header_size))
    if header_size + payload_size != len(data):
        raise ValueError("%s: %d bytes, the header says %d" % (path, len(data),
                                                               header_size + payload_size))
    off = FIXED
    arch = data[off:off + arch_len].decode()
    off += arch_len
    kernel = data[off:off + kernel_len].decode()
    off += kernel_len
    spec = data[off:off + spec_len].decode()
    return {"key": data[16:32].hex(), "arch": arch, "kernel": kernel, "spec": spec,
            "payload": data[header_size:]}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def family_of(spec):
    return spec.split(":", 1)[0]


def list_pairs(prewarm, archs, env, families=None):
    r = subprocess.run([prewarm, "--all", "--list", "--arch", archs], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        die("ckjit-prewarm --list failed (%d): %s" % (r.returncode, r.stderr.strip()))
    pairs = []
    for line in r.stdout.splitlines():
        if line.strip():
            arch, spec = line.split(None, 1)
            if families is None or family_of(spec.strip()) in families:
                pairs.append((arch, spec.strip()))
    return pairs


def fingerprint(build_dir, archs, jobs, keep, families=None):
    prewarm = os.path.join(build_dir, "tools", "ckjit-prewarm")
    if not os.access(prewarm, os.X_OK):
        die("%s: not found or not executable (pass the build directory)" % prewarm)
    env = dict(os.environ)
    # Every pair must really be compiled (so that its source is dumped) and
    # stay on disk: no layers, no disk-cache switch-off, no eviction.
    for var in ("CKJIT_CACHE_PATH", "CKJIT_CACHE_DISABLE", "CKJIT_RECORD", "CKJIT_TUNE",
                "CKJIT_CACHE_DIR", "CKJIT_ARCH"):
        env.pop(var, None)
    env["CKJIT_CACHE_MAX_SIZE"] = "0"
    env["CKJIT_CACHE_MAX_ENTRIES"] = "0"
    env.setdefault("CKJIT_LOG", "error")

    if keep:
        if os.path.exists(keep):
            die("--keep %s: exists already" % keep)
        os.makedirs(keep)
        work = keep
    else:
        work = tempfile.mkdtemp(prefix="ckjit-fingerprints-")
    try:
        cache, dump = os.path.join(work, "cache"), os.path.join(work, "dump")
        env["CKJIT_DUMP_DIR"] = dump
        pairs = list_pairs(prewarm, archs, env, families)
        t0 = time.monotonic()
        what = ["--all", "--arch", archs]
        if families is not None:  # only the listed pairs, as records in a manifest
            manifest = os.path.join(work, "pairs.manifest")
            with open(manifest, "w") as f:
                f.writelines("ckjit-spec 1 %s %s\n" % p for p in pairs)
            what = ["--manifest", manifest]
        r = subprocess.run([prewarm] + what + ["--cache-dir", cache, "-j", str(jobs), "--json"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - t0
        try:
            report = json.loads(r.stdout)
        except ValueError:
            die("ckjit-prewarm --json printed no JSON (exit %d): %s" %
                (r.returncode, r.stderr.strip()[-2000:]))
        items = report["items"] if isinstance(report, dict) else report
        by_pair = {}
        for it in items:
            by_pair[(it["arch"], it.get("canonical") or it["spec"])] = it

        rows, failures, skipped, skip_reasons = {}, [], 0, {}
        for arch, spec in pairs:
            it = by_pair.get((arch, spec))
            if it is None:
                failures.append("%s %s: not in ckjit-prewarm's report" % (arch, spec))
                continue
            if it.get("status") == UNAVAILABLE:
                rows[(arch, spec)] = (SKIPPED, SKIPPED, SKIPPED)
                skipped += 1
                why = (it.get("error") or UNAVAILABLE).splitlines()[0]
                skip_reasons.setdefault(arch, why)
                continue
            if it.get("result") not in ("compiled", "cached") or not it.get("key"):
                error = (it.get("error") or "").splitlines()
                failures.append("%s %s: %s%s" % (arch, spec, it.get("status", it.get("result")),
                                                ": " + error[0] if error else ""))
                continue
            key = it["key"]
            try:
                entry = read_entry(os.path.join(cache, key[:2], key + ".ckjit"))
                if entry["key"] != key:
                    raise ValueError("entry %s holds key %s" % (key, entry["key"]))
                with open(os.path.join(dump, "%s-%s.cu" % (entry["kernel"], key)), "rb") as f:
                    source = f.read()
            except (OSError, ValueError) as e:
                failures.append("%s %s: %s" % (arch, spec, e))
                continue
            rows[(arch, spec)] = (sha256(source), sha256(entry["payload"]),
                                  str(len(entry["payload"])))
        summary = report.get("summary", {}) if isinstance(report, dict) else {}
        print("spec-fingerprints: %d pairs (%s), %d skipped, %d failed; prewarm %.1f s, "
              "%s compiled with -j %d" % (len(pairs), counts_by_arch(rows), skipped,
                                         len(failures), wall, summary.get("compiled", "?"), jobs),
              file=sys.stderr)
        for arch in sorted(skip_reasons):
            print("spec-fingerprints: %s skipped (no compiler here): %s" %
                  (arch, skip_reasons[arch]), file=sys.stderr)
        for f in failures:
            print("spec-fingerprints: FAILED " + f, file=sys.stderr)
        return rows, failures
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def counts_by_arch(rows):
    counts, skips = {}, {}
    for (arch, spec), row in rows.items():
        counts[arch] = counts.get(arch, 0) + 1
        if row[0] == SKIPPED:
            skips[arch] = skips.get(arch, 0) + 1
    return ", ".join("%s %d%s" % (a, counts[a], " skipped" if skips.get(a) == counts[a] else
                                  " (%d skipped)" % skips[a] if a in skips else "")
                     for a in sorted(counts))


def format_rows(rows):
    lines = [FORMAT_LINE]
    for (arch, spec) in sorted(rows):
        lines.append(" ".join((arch, spec) + rows[(arch, spec)]))
    return "\n".join(lines) + "\n"


def load(path):
    rows = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) != 5:
                die("%s:%d: expected 5 fields, got %d" % (path, n, len(fields)))
            rows[(fields[0], fields[1])] = tuple(fields[2:])
    return rows


def compare(base, cur, base_name, code_only=False, verbose=False):
    """Prints the comparison; returns the number of differences (with
    code_only, of differences in code or pairs on one side only)."""
    both = sorted(set(base) & set(cur))
    only_base = sorted(set(base) - set(cur))
    only_cur = sorted(set(cur) - set(base))
    skipped = [p for p in both if SKIPPED in (base[p][0], cur[p][0])]
    checked = [p for p in both if p not in skipped]
    same_src = [p for p in checked if base[p][0] == cur[p][0]]
    same_code = [p for p in checked if base[p][1:] == cur[p][1:]]
    differ = [p for p in checked if base[p] != cur[p]]
    if code_only:
        source_only = [p for p in differ if base[p][1:] == cur[p][1:]]
        differ = [p for p in differ if base[p][1:] != cur[p][1:]]
    print("compared with %s: %d pairs in both, %d checked, %d skipped (no compiler on one side)"
          % (base_name, len(both), len(checked), len(skipped)))
    print("  source identical: %d / %d" % (len(same_src), len(checked)))
    print("  code identical:   %d / %d" % (len(same_code), len(checked)))
    if code_only and source_only:
        print("  source differs, code identical: %d pairs%s" % (
            len(source_only), "" if verbose else " (-v lists them)"))
        if verbose:
            for p in source_only:
                print("  DIFFERS source: %s %s" % p)
    for p in differ:
        what = [w for w, i in (("source", 0), ("code", 1)) if base[p][i] != cur[p][i]]
        extra = ""
        if base[p][1] != cur[p][1]:
            extra = " (code size %s -> %s)" % (base[p][2], cur[p][2])
        print("  DIFFERS %s: %s %s%s" % (" and ".join(what), p[0], p[1], extra))
    for p in only_base:
        print("  ONLY IN BASELINE: %s %s" % p)
    for p in only_cur:
        print("  ONLY IN CURRENT:  %s %s" % p)
    n = len(differ) + len(only_base) + len(only_cur)
    if n:
        print("DIFFERENT: %d differences" % n)
    elif not checked:
        print("NOTHING CHECKED: no pair was compiled on both sides")
        return -1
    else:
        print("IDENTICAL: %d pairs%s" % (len(checked), ", %d skipped" % len(skipped)
                                          if skipped else ""))
    return n


def main():
    ap = argparse.ArgumentParser(
        description="SHA-256 of the rendered source and the code object of every default "
                    "specialization (see the module docstring).")
    ap.add_argument("build_dir", nargs="?", help="meson build directory with tools/ckjit-prewarm")
    ap.add_argument("-o", "--output", help="write the fingerprints to this file")
    ap.add_argument("--compare", metavar="BASELINE", help="compare with a fingerprint file")
    ap.add_argument("--input", metavar="FILE",
                    help="with --compare: current fingerprints from FILE, no compiling")
    ap.add_argument("--arch", default="sm_90,gfx90a", help="arch list (default sm_90,gfx90a)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--keep", metavar="DIR", help="keep the cache and dumps in DIR")
    ap.add_argument("--family", metavar="LIST",
                    help="only these kernel families (comma-separated, e.g. rownorm,reduce)")
    ap.add_argument("--code-only", action="store_true",
                    help="with --compare: a pair whose source differs but whose code is "
                         "identical is not a difference (a source-text refactor)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="with --code-only: list the pairs whose source alone differs")
    a = ap.parse_args()
    families = set(a.family.split(",")) if a.family else None
    if a.input and not a.compare:
        die("--input needs --compare")
    if a.input and a.build_dir:
        die("give a build directory or --input, not both")
    if not a.input and not a.build_dir:
        die("give the build directory (e.g. build), see --help")

    failures = []
    if a.input:
        rows = load(a.input)
        if families:
            rows = {p: v for p, v in rows.items() if family_of(p[1]) in families}
    else:
        rows, failures = fingerprint(a.build_dir, a.arch, a.jobs, a.keep, families)
        text = format_rows(rows)
        if a.output:
            tmp = a.output + ".tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, a.output)
        elif not a.compare:
            sys.stdout.write(text)
    status = 1 if failures else 0
    if a.compare:
        base = load(a.compare)
        if families:
            base = {p: v for p, v in base.items() if family_of(p[1]) in families}
        n = compare(base, rows, a.compare, a.code_only, a.verbose)
        if n < 0:
            status = 2
        elif n > 0:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
