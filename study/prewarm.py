"""Compiling a run's Triton kernels before it measures, in parallel processes.

Triton compiles a kernel once per argument specialisation (integers equal to 1 or divisible by
16, pointer alignment, constexprs such as BETA_ZERO) and per autotune configuration: about a
second each, single-threaded. Left to the sweep's children, every compile happens inside some
kernel's warm-up, one after another, while the GPU idles. Here `jobs` worker processes
(`python -m study.worker prewarm SPEC.json`) make the calls the children will make (each Triton
kernel-shape of the plan, beta = 0 and, where the study checks it, alpha/beta) with every Triton
launch turned into a compile-only warm-up (`JITFunction.run(..., warmup=True)`) and each
autotuner's timer into one such call: no Triton kernel runs, so nothing is timed or tuned here;
the on-disk cache (runner.triton_cache_dir) then holds every binary. Their env has
TRITON_CACHE_AUTOTUNING=0: no autotune choice is saved, the children still search on an idle GPU.

    start(triples, jobs)  -> Prewarm (processes started), triples: (precision, Entry, Shape)
    Prewarm.wait()        -> (units, failed, seconds)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

from .plan import Entry, Shape

TIMEOUT_S = 300.0   # then the rest compile inside the warm-ups, as without a prewarm


def triples_of(groups: dict, scope: dict) -> list:
    """(precision, entry, shape) of every Triton kernel-shape in publish.schedule's scope."""
    out = []
    for prec, entries in groups.items():
        for e in entries:
            if e.family == "triton" or e.kind == "finding":
                out += [(prec, e, s) for s in scope.get(prec, {}).get(e.label, [])]
    return out


def shares(triples: list, jobs: int) -> list:
    """The triples in at most `jobs` lists. A kernel's shapes stay together (one process compiles
    a specialisation shared by several shapes once); kernels go, most shapes first, to the list
    with the fewest shapes so far."""
    by_kernel: dict = {}
    for t in triples:
        by_kernel.setdefault(t[1], []).append(t)
    out = [[] for _ in range(max(1, min(jobs, len(by_kernel))))]
    for ts in sorted(by_kernel.values(), key=lambda ts: (-len(ts), ts[0][1].label)):
        min(out, key=len).extend(ts)
    return [o for o in out if o]


@dataclass
class Prewarm:
    procs: list = field(default_factory=list)
    files: list = field(default_factory=list)
    units: int = 0
    t0: float = 0.0

    def wait(self) -> tuple:
        """(kernel-shapes compiled, failure lines, seconds since start) once every process ended."""
        failed = []
        for p in self.procs:
            try:
                out, _ = p.communicate(timeout=max(1.0, TIMEOUT_S - (time.perf_counter() - self.t0)))
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                failed.append(f"prewarm process killed after {TIMEOUT_S:.0f} s")
            except BaseException:   # the run stopped (^C, a time limit): no compiler left behind
                for q in self.procs:
                    q.kill()
                raise
            failed += [ln[len("FAILED "):] for ln in (out or "").splitlines() if ln.startswith("FAILED ")]
            if p.returncode not in (0, None) and not failed:
                failed.append(f"prewarm process exited {p.returncode}")
        for f in self.files:
            try:
                os.unlink(f)
            except OSError:
                pass
        return self.units, failed, time.perf_counter() - self.t0


def start(triples: list, jobs: int | None = None) -> Prewarm:
    """Start the compiling processes (none for no triples); wait() collects them."""
    from .registry import ROOT
    from .runner import child_env

    pw = Prewarm(units=len(triples), t0=time.perf_counter())
    # torchrun's workers of one host share its cores
    jobs = jobs or max(1, min(16, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    for share in shares(triples, jobs) if triples else []:
        spec = [{"precision": p, "entry": asdict(e), "shape": asdict(s)} for p, e, s in share]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec, f)
        pw.files.append(f.name)
        pw.procs.append(subprocess.Popen([sys.executable, "-m", "study.worker", "prewarm", f.name], cwd=ROOT,
                                         env=child_env(TRITON_CACHE_AUTOTUNING="0"), stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True))
    return pw


def one_call(fn, quantiles=None, **_):
    """An autotuner's timer that runs the configuration once and reports 0: every configuration
    runs (or, under compile_only, compiles), none is timed."""
    fn()
    return [0.0] * len(quantiles) if quantiles else 0.0


def compile_only(modules) -> list:
    """From now on in this process, a Triton launch compiles and returns without running, and the
    autotuners of `modules` (returned) time each configuration by one such call."""
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    if not getattr(JITFunction.run, "study_compile_only", False):
        launch = JITFunction.run

        def run(self, *args, grid, warmup, **kwargs):
            return launch(self, *args, grid=grid, warmup=True, **kwargs)
        run.study_compile_only = True
        JITFunction.run = run

    tuners = [v for m in modules for v in vars(m).values() if isinstance(v, Autotuner)]
    for v in tuners:
        v.do_bench = one_call
    return tuners


def child_main(spec_path: str) -> int:
    """`python -m study.worker prewarm SPEC.json`: compile each listed kernel-shape's calls.
    Prints "FAILED label at shape: why" for a call that raised anything but a Limits refusal."""
    import torch

    from .harness import ALPHA, BETA, Operands
    from .kernels import TritonKernel
    from .measure import make_call, short_error
    from .registry import find

    spec = json.loads(open(spec_path).read())
    calls, tuners = {}, {}
    for item in spec:
        e, s = Entry(**item["entry"]), Shape(**item["shape"])
        try:
            if e not in calls:
                calls[e] = make_call(e)
                tuners[e] = compile_only([TritonKernel(find("triton", e.stage)).module])
            ops = Operands(s.M, s.N, s.K, item["precision"], **({"scaling": e.scaling} if e.scaling else {}))
            a, b, c = ops.a_of(e.layout), ops.b(e.layout), ops.output()
            calls[e](a, b, c, **ops.call_kwargs)
            if calls[e].alpha_beta and not ops.call_kwargs:
                for at in tuners[e]:   # the check's call runs the tuned config with beta != 0: which
                    at.cache.clear()   # one is not known here, so every config compiles that variant
                calls[e](a, b, c, alpha=ALPHA, beta=BETA)
        except ValueError:   # the stage's Limits refuse the shape: the child records that
            pass
        except Exception as exc:
            print(f"FAILED {e.label} at {s.name}: {short_error(exc)[:200]}", flush=True)
        torch.cuda.empty_cache()
    return 0


def alongside(triples: list, work, phases: dict, say):
    """work() (the CUDA build) while `triples` compile: its result once both are done;
    phases gets "build" (work's seconds) and "prewarm" (the wait for the compiles after it).
    Nothing is started without a GPU or under TRITON_INTERPRET."""
    import torch

    go = bool(triples) and torch.cuda.is_available() and not os.environ.get("TRITON_INTERPRET")
    pw = start(triples) if go else Prewarm()
    t = time.perf_counter()
    out = work()
    phases["build"] = time.perf_counter() - t
    if pw.procs:
        t = time.perf_counter()
        n, failed, secs = pw.wait()
        phases["prewarm"] = time.perf_counter() - t
        say(f"Triton: {n} kernel-shapes compiled ahead in {secs:.0f} s by {len(pw.procs)} processes"
            + (f"; {len(failed)} calls failed there (their rows will say why), e.g. {failed[0]}" if failed else ""))
    return out
