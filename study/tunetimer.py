"""The device timer of the Triton stages' autotuners (study.tritonlib.autotune_do_bench).

    queued_bench(call, quantiles=None, rep_ms=25.0, max_reps=50) -> float | list

triton.testing.do_bench records a start event, then calls the kernel from Python. When the GPU
has run dry by then, the event fires while the host is still launching, and the host's time
enters the reading. An autotuner's call is slower on the host than a bare launch: it copies C
before and after each run (restore_value). On an H200 (session 62, docs/stages/s15_fp8.md) the
readings were bimodal: one Triton s15 config read 25.5 us in one tuning and 69.2 us in the next
at 256 x 4096 x 4096. Between two H200 runs of the same Triton code, 22 of 44 s15 shape classes
changed config; at 2048 x 4096 x 4096 the new pick took 17% more time.

Here every repeat is enqueued behind a GPU spin, and the spin is checked to outlast the host's
enqueueing. An event after the spin must still be pending when the last repeat has been queued.
If it is not, the run is repeated with a spin four times longer. The events then time only GPU
work: the call's kernels, and the copies around them, which are the same for every config.
Every repeat follows the study's L2 flush (harness.L2Flush), so its reads come from HBM.
"""
from __future__ import annotations

import torch

from study.harness import L2Flush

FIRST_SPIN_CYCLES = 1_000_000     # ~0.5 ms at 1.98 GHz; x4 per run the host outlasted
MAX_TRIES = 8
_flush: dict = {}


def _flush_for(device: int) -> L2Flush:
    """The study's L2 flush (harness.L2Flush), one per device, made on it."""
    if device not in _flush:
        _flush[device] = L2Flush()
    return _flush[device]


def _gated_times(call, n: int, spin: int, flush: L2Flush) -> list | None:
    """n timed repeats queued behind a spin of `spin` cycles, in ms; None if the spin ended
    before the last repeat was queued (host time may be in the readings)."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    gate = torch.cuda.Event()
    torch.cuda._sleep(spin)
    gate.record()
    for start, end in events:
        flush()
        start.record()
        call()
        end.record()
    starved = gate.query()
    torch.cuda.synchronize()
    return None if starved else [start.elapsed_time(end) for start, end in events]


def queued_bench(call, quantiles=None, rep_ms: float = 25.0, max_reps: int = 50):
    """GPU time of call() in ms: the median, or a list of `quantiles` as do_bench returns them.
    One warm-up call, five repeats to size the run, then rep_ms of repeats (5 to max_reps)."""
    call()
    torch.cuda.synchronize()
    flush = _flush_for(torch.cuda.current_device())
    spin, n, sized = FIRST_SPIN_CYCLES, 5, False
    for _ in range(MAX_TRIES):
        times = _gated_times(call, n, spin, flush)
        if times is None:
            spin *= 4
            continue
        if not sized:
            est = sorted(times)[len(times) // 2]
            n, sized = max(5, min(max_reps, int(rep_ms / max(est, 1e-3)))), True
            continue
        t = torch.tensor(times, dtype=torch.float64)
        if quantiles:
            return torch.quantile(t, torch.tensor(quantiles, dtype=torch.float64)).tolist()
        return float(t.median())
    raise RuntimeError(f"queued_bench: the host still outran a GPU spin of {spin // 4} cycles "
                       f"after {MAX_TRIES} tries; the call's host time cannot be kept out of its timing")
