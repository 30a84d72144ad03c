"""`make sanitize`: compute-sanitizer over every CUDA stage (memcheck, racecheck, synccheck) and
every Triton stage (memcheck; --triton-tools for more).

Builds the CUDA stages first (outside the sanitizer, in parallel through study.build), then for each
stage, precision and tool runs this file's --child mode under compute-sanitizer on ragged shapes
(67x45x77, one just past a 128 tile: 129x131x135, and ragged-M shapes with N and K multiples of 8
for the stages that need 16-byte rows; from s14 on also ragged decode shapes), in every layout the
stage's header lists, beta = 0 and beta != 0 (racecheck of s14 on: its kernels at few k-steps,
RACE_DECODE_SHAPES). A Triton stage's autotuner runs every configuration once per shape (its timer
replaced by one call), so each configuration is sanitized, not only the one it would pick. --shapes
MxNxK ... sanitizes only those; each run gets --timeout seconds (TIMEOUT in the table, with the last
case it finished). Prints a summary table; exits non-zero on any sanitizer error, wrong result or
timeout."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

TOOLS = ("memcheck", "racecheck", "synccheck")
# Ragged in every dimension, then ragged M with N/K multiples of 8 so that the stages whose
# Limits need 16-byte rows (tensor-core cp.async, TMA) are sanitized too, not just refused.
SHAPES = [(67, 45, 77), (129, 131, 135), (67, 45, 72), (67, 40, 72), (129, 136, 136)]
# Stages that divide K among CTAs (s14 on) also at ragged decode shapes: stream-K over all SMs
# with partials and flags in the workspace (3 x 4100 x 4104; at 40 tokens CUDA s14's 64-row
# weight tiles, at 200 its 64-row token tiles, stream-K across them), its one-wave 168-row weight
# tiles (200 x 11001 x 264), and a single CTA (1 x 64 x 72).
DECODE_SHAPES = [(3, 4100, 4104), (40, 4100, 4104), (200, 4100, 4104), (200, 11001, 264), (1, 64, 72)]
# racecheck looks for shared-memory hazards inside a CTA (and a cluster), so it takes CUDA s14's
# kernels at few k-steps and CTAs instead (plans from make_plan for 132 SMs, as
# tests/test_plan_s14.py runs it): a three-way split through the flags (24 CTAs); stream-K over
# 64-row token tiles, A-B, flags (17); the one-wave 168-row weight tiles (132 CTAs, 5 k-steps), with
# ragged N (register stores) and with 16-byte C rows (the staged epilogue's two passes); one CTA.
# Not the two-way splits on 2-CTA clusters (RACE_PAIR_SHAPES: split-K pairs at 128 x 16 tiles, 8
# CTAs; stream-K pairs, narrow 64-row tiles x 64 / 128 tokens, 32 CTAs): racecheck did not finish
# one of them in 330-360 s on the H100, at any of five shapes, where the others take 40-106 s and
# memcheck and synccheck pass (docs/stages/s14_stream_k.md, session 50). Name them with --shapes.
RACE_DECODE_SHAPES = [(3, 1024, 520), (200, 1024, 1032), (200, 11001, 264), (200, 11008, 264), (1, 64, 72)]
RACE_PAIR_SHAPES = [(3, 512, 264), (40, 1024, 520), (100, 1024, 520)]


def shapes_for(number: int, tool: str, named: str = "") -> list:
    """The shapes a stage is sanitized at: `named` ("MxNxK,MxNxK", --shapes) if given, else SHAPES
    and, from s14 on, the decode shapes (racecheck: RACE_DECODE_SHAPES)."""
    if named:
        return [tuple(int(v) for v in x.split("x")) for x in named.split(",") if x]
    return SHAPES + ((RACE_DECODE_SHAPES if tool == "racecheck" else DECODE_SHAPES) if number >= 14 else [])


def child(family: str, stem: str, precision: str) -> int:
    """Run one stage on the sanitizer shapes (inside compute-sanitizer; the tool and any named
    shapes come in SANITIZE_TOOL / SANITIZE_SHAPES), printing each case as it finishes."""
    import gemm_checks as gc
    import study

    k = study.kernel(family, stem)
    if family == "triton":   # every autotune configuration runs once per shape, untimed
        from triton.runtime.autotuner import Autotuner

        from study.prewarm import one_call

        for v in vars(k.module).values():
            if isinstance(v, Autotuner):
                v.do_bench = one_call
    for M, N, K in shapes_for(k.stage.number, os.environ.get("SANITIZE_TOOL", ""), os.environ.get("SANITIZE_SHAPES", "")):
        for layout in k.stage.layouts:   # every layout the header lists: each is its own instantiation
            for alpha, beta in ((1.0, 0.0), (1.5, 0.5)):
                try:
                    gc.check_case(k, gc.Case(M, N, K, alpha=alpha, beta=beta, layout=layout), precision, "cuda")
                    print(f"[done] {M}x{N}x{K} {layout} alpha {alpha} beta {beta}", flush=True)
                except ValueError as exc:   # a declared limit: nothing to sanitize at this shape
                    print(f"[skip] {stem} {precision} {M}x{N}x{K} {layout}: {exc}", flush=True)
    return 0


def run_limited(cmd: list, env: dict, timeout: float) -> tuple:
    """(returncode or None on timeout, stdout + stderr) of cmd, its whole process group killed
    after `timeout` seconds (compute-sanitizer's target would outlive a kill of the tool alone)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=3, metavar=("FAMILY", "STEM", "PRECISION"))
    ap.add_argument("--tools", default=",".join(TOOLS), help="for the CUDA stages")
    ap.add_argument("--triton-tools", default="memcheck", help="for the Triton stages")
    ap.add_argument("--families", default="cuda,triton")
    ap.add_argument("--jobs", type=int, default=12, help="sanitizer runs at a time (they share the GPU)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per sanitizer run (then TIMEOUT)")
    ap.add_argument("--shapes", nargs="+", default=[], metavar="MxNxK", help="only these shapes")
    ap.add_argument("stems", nargs="*")
    args = ap.parse_args()
    if args.child:
        return child(*args.child)
    bad = [x for x in args.shapes if len(x.split("x")) != 3 or not all(v.isdigit() and int(v) > 0 for v in x.split("x"))]
    if bad:
        print(f"--shapes: {bad[0]!r} is not MxNxK with sizes >= 1 (stages go before --shapes)", file=sys.stderr)
        return 2
    import study

    san = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not os.path.exists(san):
        print("compute-sanitizer not found", file=sys.stderr)
        return 2
    stages = [s for fam in args.families.split(",") for s in study.all_stages(fam)
              if not args.stems or s.stem in args.stems or s.short in args.stems]
    results = {r.stem: r for r in study.build.build([s for s in stages if s.family == "cuda"])}
    rows, bad = [], 0
    env = dict(os.environ, PYTHONPATH=str(HERE.parent), SANITIZE_SHAPES=",".join(args.shapes))
    todo = []
    for s in stages:
        if s.family == "triton":
            todo += [(s, prec, tool) for prec in s.precisions for tool in args.triton_tools.split(",")]
            continue
        if not results[s.stem].ok:
            rows.append((s.stem, "-", "build", "FAIL", 0.0, results[s.stem].error[-200:]))
            bad += 1
            continue
        todo += [(s, prec, tool) for prec in s.precisions for tool in args.tools.split(",")]

    def one(item):
        s, prec, tool = item
        cmd = [san, f"--tool={tool}", "--error-exitcode=99", "--print-limit=20",
               sys.executable, __file__, "--child", s.family, s.stem, prec]
        t = time.perf_counter()
        rc, out = run_limited(cmd, dict(env, SANITIZE_TOOL=tool), args.timeout)
        dt = time.perf_counter() - t
        # memcheck/synccheck end with "ERROR SUMMARY: N errors"; racecheck with
        # "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)".
        m = re.search(r"ERROR SUMMARY: (\d+) error", out) or \
            re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) error", out)
        nerr = int(m.group(1)) if m else -1
        ok = rc == 0 and nerr == 0
        detail = ""
        if rc is None:
            done = [ln for ln in out.splitlines() if ln.startswith(("[done]", "[skip]"))]
            detail = f"TIMEOUT after {args.timeout:.0f} s; last finished: {done[-1] if done else 'none'}"
        elif not ok:
            first = [ln for ln in out.splitlines() if "=====" in ln and
                     any(w in ln for w in ("Error", "Race", "Invalid", "Hazard", "Barrier"))][:3]
            detail = " | ".join(first) or (out.strip().splitlines() or ["(no output)"])[-1][:300]
        name = f"{s.family} {s.stem}"
        print(f"{name:31s} {prec:5s} {tool:10s} {'ok' if ok else 'FAIL'} {dt:6.1f}s {detail}", flush=True)
        return (name, prec, tool, "ok" if ok else "TIMEOUT" if rc is None else f"FAIL({nerr})", dt, detail)

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for r in pool.map(one, todo):
            rows.append(r)
            bad += r[3] != "ok"
    print("\nsummary:")
    print(f"{'stage':31s} {'prec':5s} {'tool':10s} result")
    for r in rows:
        print(f"{r[0]:31s} {r[1]:5s} {r[2]:10s} {r[3]} {r[5][:160]}")
    print(f"\n{len(rows) - bad} ok, {bad} failing")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
