#!/usr/bin/env python3
"""Before/after timing of two builds of ckjit on one GPU, case by case.

usage: compare_builds.py --base BUILD --new BUILD [--bench rows,gemm]
                         [--rounds N] [--budget S] [--quick] [--only TEXT]...
                         [--same-bench] [-o FILE.jsonl]

For a refactor that must not change performance (issue 16): both builds'
bench_rows and bench_gemm measure every case in a fresh child process
(`--child-case I`), alternating base and new (A B, then B A, ...) on the
same card, after one untimed warm-up run of each (it compiles the kernels
into a cache directory per build, kept for the timed runs).  Per case it
prints the median of each side and the ratio new / base of the medians
(higher is better for GB/s and TFLOP/s, lower for us: the ratio is always
oriented so that > 1 means the new build is faster).

Only the child protocol of the benches is used, so this works between any
two builds whose case lists agree (it checks that `--list` prints the same
cases).  The records are those the benches print (bench/bench_util.h);
a case whose record has no value, or whose check failed, is reported with
its status and left out of the summary.

Exit status: 0 when every case was measured on both sides, 1 otherwise, 2
usage errors.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HIGHER_IS_BETTER = {"GB/s", "TFLOP/s", "TB/s", "GFLOP/s"}


def die(msg):
    print("compare_builds: " + msg, file=sys.stderr)
    sys.exit(2)


def bench_path(build, bench):
    path = os.path.join(build, "bench", "bench_" + bench)
    if not os.access(path, os.X_OK):
        die("%s: not found (is the build configured with cuda.h and libcuda?)" % path)
    return path


def list_cases(binary, quick):
    args = [binary, "--list"] + (["--quick"] if quick else [])
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        die("%s --list failed: %s" % (binary, r.stderr.strip()))
    return [line.split("  (")[0].strip() for line in r.stdout.splitlines() if line.strip()]


def run_child(binary, index, cache_dir, quick, timeout, lib_dir=None):
    """The value records of one child run: [(metric, unit, value, status)]."""
    env = dict(os.environ, CKJIT_CACHE_DIR=cache_dir)
    if lib_dir:  # this libckjit.so before the binary's own (its RUNPATH)
        env["LD_LIBRARY_PATH"] = lib_dir + (":" + env["LD_LIBRARY_PATH"]
                                            if env.get("LD_LIBRARY_PATH") else "")
    args = [binary, "--child-case", str(index)] + (["--quick"] if quick else [])
    try:
        r = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [(None, None, None, "TIMEOUT")]
    out = []
    for line in r.stdout.splitlines():
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        if rec.get("kind") in ("info", "note"):
            continue
        status = "ok"
        if rec.get("value") is None:
            status = rec.get("status", "no value")
        elif rec.get("check", "ok") != "ok":
            status = "check " + str(rec.get("check"))
        out.append((rec.get("metric"), rec.get("unit"), rec.get("value"), status))
    if not out:
        out.append((None, None, None, "no record (exit %d)" % r.returncode))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True, help="build directory before the change")
    ap.add_argument("--new", required=True, help="build directory after the change")
    ap.add_argument("--bench", default="rows,gemm", help="rows, gemm or both (default)")
    ap.add_argument("--rounds", type=int, default=3, help="timed runs per side (default 3)")
    ap.add_argument("--budget", type=float, default=1e9, help="stop starting rounds after S seconds")
    ap.add_argument("--quick", action="store_true", help="pass --quick to the benches")
    ap.add_argument("--only", action="append", default=[],
                    help="only cases whose name contains this (repeatable)")
    ap.add_argument("--timeout", type=float, default=90, help="per child run (default 90 s)")
    ap.add_argument("--same-bench", action="store_true",
                    help="run the base build's bench binaries for both sides, each with its "
                         "own libckjit.so (LD_LIBRARY_PATH): only the library differs")
    ap.add_argument("-o", "--output", help="write one JSON record per case here")
    a = ap.parse_args()
    t0 = time.time()
    cache_root = tempfile.mkdtemp(prefix="ckjit-compare-")
    results = []  # (bench, metric, unit, base values, new values, statuses)
    for bench in [b for b in a.bench.split(",") if b]:
        sides = {"base": bench_path(a.base, bench), "new": bench_path(a.new, bench)}
        libs = {"base": None, "new": None}
        if a.same_bench:
            sides["new"] = sides["base"]
            libs = {"base": os.path.abspath(a.base), "new": os.path.abspath(a.new)}
        cases = {s: list_cases(b, a.quick) for s, b in sides.items()}
        if cases["base"] != cases["new"]:
            die("bench_%s lists different cases in the two builds" % bench)
        caches = {s: os.path.join(cache_root, "%s-%s" % (bench, s)) for s in sides}
        for d in caches.values():
            os.makedirs(d, exist_ok=True)
        per_case = []
        for i, name in enumerate(cases["base"]):
            if a.only and not any(o in name for o in a.only):
                continue
            values = {"base": [], "new": []}
            bad = set()
            unit = None
            metric = name
            for s in ("base", "new"):  # warm-up: compiles into the side's cache
                run_child(sides[s], i, caches[s], a.quick, a.timeout * 4, libs[s])
            for rnd in range(a.rounds):
                if time.time() - t0 > a.budget:
                    break
                order = ("base", "new") if rnd % 2 == 0 else ("new", "base")
                for s in order:
                    recs = run_child(sides[s], i, caches[s], a.quick, a.timeout, libs[s])
                    m, u, v, st = recs[0]
                    if st != "ok":
                        bad.add("%s: %s" % (s, st))
                        continue
                    metric, unit = m or metric, u
                    values[s].append(v)
            per_case.append((bench, metric, unit, values["base"], values["new"], sorted(bad)))
            sys.stderr.write("  %s %d/%d %s\n" % (bench, i + 1, len(cases["base"]), metric))
        results.extend(per_case)

    out = open(a.output, "w") if a.output else None
    ratios, missing = [], 0
    print("%-58s %12s %12s %-8s %7s  %s" % ("case", "base", "new", "unit", "new/base", "runs"))
    for bench, metric, unit, vb, vn, bad in results:
        if not vb or not vn:
            missing += 1
            print("%-58s %12s %12s %-8s %7s  %s" % (metric[:58], "-", "-", unit or "", "-",
                                                   "; ".join(bad) or "not run (budget)"))
            continue
        mb, mn = statistics.median(vb), statistics.median(vn)
        speed = mn / mb if unit in HIGHER_IS_BETTER else mb / mn
        ratios.append(speed)
        print("%-58s %12.4g %12.4g %-8s %7.3f  %d+%d%s" % (metric[:58], mb, mn, unit or "", speed,
                                                         len(vb), len(vn),
                                                         " (" + "; ".join(bad) + ")" if bad else ""))
        if out:
            out.write(json.dumps({"bench": bench, "metric": metric, "unit": unit, "base": vb,
                                  "new": vn, "base_median": mb, "new_median": mn,
                                  "speed_new_over_base": speed}) + "\n")
    if ratios:
        geo = statistics.geometric_mean(ratios)
        print("\n%d cases measured on both sides (%d rounds each): speed new/base geomean %.4f, "
              "min %.3f, max %.3f; %d outside +-3%%, %d outside +-5%%"
              % (len(ratios), a.rounds, geo, min(ratios), max(ratios),
                 sum(abs(r - 1) > 0.03 for r in ratios), sum(abs(r - 1) > 0.05 for r in ratios)))
    if missing:
        print("%d cases not measured on both sides" % missing)
    print("wall time %.0f s" % (time.time() - t0))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
