#!/usr/bin/env python3
"""Input that must be refused early and exactly, through the tools (issue 15,
items 6, 7, 8 and 12), run by meson:

    test_inputs_e2e.py --cache TOOL --prewarm TOOL --inspect TOOL

  * sizes: CKJIT_CACHE_MAX_SIZE and `ckjit-cache prune --max-size` accept
    the documented grammar only ("1.5e3", "0.5", ".5e99", "10GB", " 1G"
    refused with the reason; "1.5G", "2GiB" taken), one warning per process;
  * NVIDIA archs that are well formed but not targets of the NVRTC present
    (sm_101, sm_90f, sm_89a) fail as CKJIT_ERROR_UNSUPPORTED naming NVRTC's
    list, not as a compile error; sm_90 / sm_90a / sm_80 still compile;
  * AMD target features in either order are one target: one item, one key,
    the other spelling counted as a duplicate, also from a manifest;
  * a cache directory setting too long for a path is named (the variable or
    option, its length, the limit) by ckjit-cache, ckjit-prewarm and
    ckjit-inspect, even with CKJIT_LOG=off.

A vendor whose compiler is missing is skipped with the reason; the test
exits 77 when something was skipped and nothing failed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import traceback

from tools_e2e_common import Failure, Skip, check

CKJIT_PATH_MAX = 1024
DEFAULT_MAX_BYTES = 1 << 30


class Tools:
    def __init__(self, args, work):
        self.cache = args.cache
        self.prewarm = args.prewarm
        self.inspect = args.inspect
        self.work = work
        self.env = dict(os.environ)
        for v in list(self.env):
            if v.startswith("CKJIT_"):
                self.env.pop(v)
        self.env["XDG_CACHE_HOME"] = os.path.join(work, "xdg")
        self._vendors = None

    def run(self, argv, env=None, timeout=300):
        e = dict(self.env)
        e.update(env or {})
        p = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=timeout)
        check(p.returncode >= 0, f"{argv[0]} died from signal {-p.returncode}: {p.stderr[-2000:]}")
        return p

    def fresh_dir(self, name):
        d = os.path.join(self.work, name)
        os.makedirs(d, exist_ok=False)
        return d

    def vendors(self):
        """The vendors whose compiler works here (one tiny prewarm each)."""
        if self._vendors is None:
            self._vendors = {}
            for vendor, arch in (("nvidia", "sm_90"), ("amd", "gfx90a")):
                d = self.fresh_dir(f"probe-{vendor}")
                p = self.run([self.prewarm, "--cache-dir", d, "--arch", arch, "--json",
                              "transpose:dtype=f32"])
                ok = p.returncode == 0
                self._vendors[vendor] = ok or p.stdout + p.stderr
        return self._vendors

    def need(self, vendor):
        v = self.vendors()[vendor]
        if v is not True:
            raise Skip(f"no working {vendor} compiler: {v[-300:]}")


def parse_json(p):
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        raise Failure(f"output is not JSON ({e}): {p.stdout[:500]!r} {p.stderr[-500:]!r}")


# ---- item 6 ---------------------------------------------------------------
def t_size_env(t):
    d = t.fresh_dir("size-env")
    cases = {
        "1.5e3": None, "0.5": None, ".5e99": None, "10GB": None, " 1G": None, "1 G": None,
        "0.0001K": None, "9223372036854775808": None,
        "1.5G": 3 << 29, "2GiB": 2 << 30, "512M": 512 << 20, "1073741825": 1073741825, "0": 0,
    }
    for value, want in cases.items():
        p = t.run([t.cache, "--cache-dir", d, "--json", "info"],
                  env={"CKJIT_CACHE_MAX_SIZE": value})
        check(p.returncode == 0, f"info with CKJIT_CACHE_MAX_SIZE={value!r}: rc {p.returncode}")
        got = parse_json(p)["max_bytes"]
        warnings = p.stderr.count("CKJIT_CACHE_MAX_SIZE=")
        if want is None:
            check(got == DEFAULT_MAX_BYTES,
                  f"CKJIT_CACHE_MAX_SIZE={value!r} gave {got}, want the default")
            check(warnings == 1, f"CKJIT_CACHE_MAX_SIZE={value!r}: {warnings} warnings, want 1: "
                  f"{p.stderr}")
            check("is not a size:" in p.stderr, f"no reason given: {p.stderr}")
        else:
            check(got == want, f"CKJIT_CACHE_MAX_SIZE={value!r} gave {got}, want {want}")
            check(warnings == 0, f"CKJIT_CACHE_MAX_SIZE={value!r} warned: {p.stderr}")
    p = t.run([t.cache, "--cache-dir", d, "--json", "info"],
              env={"CKJIT_CACHE_MAX_ENTRIES": " 12"})
    check(parse_json(p)["max_entries"] == 50000 and "CKJIT_CACHE_MAX_ENTRIES" in p.stderr,
          f"CKJIT_CACHE_MAX_ENTRIES=' 12' not refused: {p.stderr}")


def t_size_prune_option(t):
    d = t.fresh_dir("size-prune")
    for value, why in (("1.5e3", "exponent"), ("0.5", "fraction"), (".5e99", "digit"),
                       ("10GB", "KB"), ("-1", "digit")):
        p = t.run([t.cache, "--cache-dir", d, "prune", "--max-size", value])
        check(p.returncode == 2, f"prune --max-size {value}: rc {p.returncode}, want 2")
        check(value in p.stderr and why in p.stderr,
              f"prune --max-size {value}: reason not named: {p.stderr}")
    p = t.run([t.cache, "--cache-dir", d, "prune", "--max-entries", "5x"])
    check(p.returncode == 2, f"prune --max-entries 5x: rc {p.returncode}")
    p = t.run([t.cache, "--cache-dir", d, "--json", "prune", "--max-size", "1.5K"])
    check(p.returncode == 0, f"prune --max-size 1.5K: rc {p.returncode}: {p.stderr}")


# ---- item 7 ---------------------------------------------------------------
def t_nvidia_archs(t):
    t.need("nvidia")
    d = t.fresh_dir("archs")
    refused = ["sm_101", "sm_90f", "sm_89a", "sm_1000"]
    compiled = ["sm_90", "sm_90a", "sm_80"]
    p = t.run([t.prewarm, "--cache-dir", d, "--arch", ",".join(refused + compiled), "--json",
               "transpose:dtype=f16"])
    check(p.returncode == 1, f"prewarm: rc {p.returncode}, want 1 (some items fail)")
    items = {i["arch"]: i for i in parse_json(p)["items"]}
    for arch in refused:
        i = items.get(arch)
        check(i is not None and i["result"] == "failed", f"{arch}: not failed: {i}")
        check(i["status"] == "CKJIT_ERROR_UNSUPPORTED",
              f"{arch}: {i['status']}, want CKJIT_ERROR_UNSUPPORTED: {i.get('error')}")
        check("invalid value" not in i["error"], f"{arch}: NVRTC's own error leaked: {i['error']}")
        if arch != "sm_1000":
            check("sm_75, sm_80" in i["error"], f"{arch}: no supported list: {i['error']}")
    for arch in compiled:
        i = items.get(arch)
        check(i is not None and i["result"] == "compiled", f"{arch}: {i}")


# ---- item 8 ---------------------------------------------------------------
def t_feature_order(t):
    t.need("amd")
    d = t.fresh_dir("features")
    spellings = ["gfx90a:xnack+:sramecc+", "gfx90a:sramecc+:xnack+"]
    p = t.run([t.prewarm, "--cache-dir", d, "--arch", ",".join(spellings), "--json",
               "transpose:dtype=f16"])
    check(p.returncode == 0, f"prewarm: rc {p.returncode}: {p.stderr[-500:]}")
    out = parse_json(p)
    check(len(out["items"]) == 1, f"two items for one target: {out['items']}")
    check(out["items"][0]["arch"] == "gfx90a:sramecc+:xnack+", f"arch shown: {out['items'][0]}")
    check(out["summary"]["duplicates"] == 1, f"duplicates: {out['summary']}")
    key = out["items"][0]["key"]
    # A manifest naming the other spelling finds the same entry.
    manifest = os.path.join(t.work, "features.specs")
    with open(manifest, "w") as f:
        f.write("gfx90a:xnack+:sramecc+ transpose:dtype=f16\n"
                "ckjit-spec 1 gfx90a:sramecc+:xnack+ transpose:dtype=f16\n")
    p = t.run([t.prewarm, "--cache-dir", d, "--manifest", manifest, "--json"])
    out = parse_json(p)
    check(p.returncode == 0 and len(out["items"]) == 1, f"manifest: {out}")
    check(out["items"][0]["result"] == "cached" and out["items"][0]["key"] == key,
          f"manifest item not the cached entry {key}: {out['items'][0]}")
    check(out["summary"]["duplicates"] == 1, f"manifest duplicates: {out['summary']}")
    entries = [f for _, _, fs in os.walk(d) for f in fs if f.endswith(".ckjit")]
    check(len(entries) == 1, f"{len(entries)} entries for one kernel: {entries}")
    # A feature named twice is refused.
    p = t.run([t.prewarm, "--cache-dir", d, "--arch", "gfx90a:xnack+:xnack-", "--json",
               "transpose:dtype=f16"])
    i = parse_json(p)["items"][0]
    check(p.returncode == 1 and i["status"] == "CKJIT_ERROR_UNSUPPORTED", f"xnack twice: {i}")


# ---- item 12 --------------------------------------------------------------
def t_long_cache_dir(t):
    long_dir = os.path.join(t.work, "d" * 5000)
    n = len(long_dir)
    limit = f"at most {CKJIT_PATH_MAX - 1} bytes"
    for log in ({}, {"CKJIT_LOG": "off"}):
        runs = [
            ("ckjit-cache (CKJIT_CACHE_DIR)", [t.cache, "info"], {"CKJIT_CACHE_DIR": long_dir},
             f"CKJIT_CACHE_DIR is {n} bytes long"),
            ("ckjit-cache --cache-dir", [t.cache, "--cache-dir", long_dir, "info"], {},
             f"--cache-dir / ckjit_options.cache_dir) is {n} bytes long"),
            ("ckjit-cache (XDG_CACHE_HOME)", [t.cache, "info"], {"XDG_CACHE_HOME": long_dir},
             f"XDG_CACHE_HOME is {n} bytes long"),
            ("ckjit-prewarm (CKJIT_CACHE_DIR)",
             [t.prewarm, "--arch", "sm_90", "transpose:dtype=f32"], {"CKJIT_CACHE_DIR": long_dir},
             f"CKJIT_CACHE_DIR is {n} bytes long"),
            ("ckjit-prewarm --cache-dir",
             [t.prewarm, "--cache-dir", long_dir, "--arch", "sm_90", "transpose:dtype=f32"], {},
             f"is {n} bytes long"),
        ]
        if t.inspect:
            runs.append(("ckjit-inspect --cache-dir",
                         [t.inspect, "--cache-dir", long_dir, "--arch", "sm_90",
                          "transpose:dtype=f32"], {}, f"is {n} bytes long"))
        for name, argv, env, want in runs:
            e = dict(env)
            e.update(log)
            p = t.run(argv, env=e)
            check(p.returncode != 0, f"{name}: exit 0 without a cache directory")
            check(want in p.stderr and limit in p.stderr,
                  f"{name} {log}: the reason is not named ({want!r}, {limit!r}): "
                  f"{p.stderr[:300]!r}...")
            check("set CKJIT_CACHE_DIR or HOME" not in p.stderr,
                  f"{name}: still says no variable is set: {p.stderr[:300]!r}")


TESTS = [t_size_env, t_size_prune_option, t_nvidia_archs, t_feature_order, t_long_cache_dir]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--prewarm", required=True)
    ap.add_argument("--inspect")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="ckjit-inputs-") as work:
        t = Tools(args, work)
        for test in TESTS:
            name = test.__name__[2:]
            try:
                test(t)
                results.append((name, "ok", ""))
            except Skip as e:
                results.append((name, "skip", str(e)))
            except Failure as e:
                results.append((name, "FAIL", str(e)))
            except Exception:
                results.append((name, "FAIL", traceback.format_exc()))
    for name, status, why in results:
        print(f"{status:4} {name}{': ' + why if why else ''}")
    failed = [r for r in results if r[1] == "FAIL"]
    skipped = [r for r in results if r[1] == "skip"]
    print(f"{len(results) - len(failed) - len(skipped)} ok, {len(failed)} failed, "
          f"{len(skipped)} skipped")
    if failed:
        return 1
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
