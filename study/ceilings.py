"""Ceilings measured on this GPU in this run, and the datasheet values drawn beside them.

- copy_bandwidth: a 512 MB device-to-device copy; bytes read + bytes written per second.
- fp32_fma_chain: a Triton kernel of dependent FMAs (x = x * a + b), four independent chains per
  element and many elements per thread, over 8 programs per SM: FFMA throughput, no memory.
- cublas_<p>: the best of cuBLAS at 4096^3 and 8192^3 (NN and NT) for each precision; the
  tensor-core roofs (no hand-written tensor-core peak kernel here). fp8: torch._scaled_mm, NT
  (its only layout), per-tensor scales, the best of fast accumulation off and on.
Rows: name, source ("measured" | "datasheet"), precision, value, unit, detail.
"""
from __future__ import annotations

import pandas as pd
import triton
import triton.language as tl

from .roofline import datasheet_entry

FMA_BLOCK = 1024      # elements per program: 8 per thread at 4 warps
FMA_ITERS = 8192      # dependent steps per chain
FMA_CHAINS = 4        # independent chains per element (written out below)
COPY_BYTES = 512 << 20


@triton.jit
def fma_chain_kernel(out_ptr, a, b, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x0 = offs.to(tl.float32) * 1e-9
    x1 = x0 + 1.0
    x2 = x0 + 2.0
    x3 = x0 + 3.0
    for _ in range(ITERS):  # each line depends on its previous value: 4 chains, latency hidden by ILP + warps
        x0 = x0 * a + b
        x1 = x1 * a + b
        x2 = x2 * a + b
        x3 = x3 * a + b
    tl.store(out_ptr + offs, x0 + x1 + x2 + x3)  # keeps every chain live


def _events_ms(fn, reps: int) -> list:
    import torch

    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e))
    return sorted(out)


def copy_bandwidth(reps: int = 20) -> dict:
    import torch

    n = COPY_BYTES // 4
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    ms = _events_ms(lambda: dst.copy_(src), reps)[reps // 2]
    return {"name": "copy_bandwidth", "precision": "memory", "value": 2 * COPY_BYTES / (ms * 1e9),
            "unit": "TB/s", "detail": f"device copy of {COPY_BYTES >> 20} MB, read + write, median of {reps}"}


def fma_peak(reps: int = 10) -> dict:
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    programs = 8 * sms
    out = torch.empty(programs * FMA_BLOCK, device="cuda")

    def run():
        fma_chain_kernel[(programs,)](out, 0.999999, 1e-6, ITERS=FMA_ITERS, BLOCK=FMA_BLOCK, num_warps=4)
    ms = _events_ms(run, reps)[reps // 2]
    fl = 2.0 * FMA_CHAINS * FMA_ITERS * programs * FMA_BLOCK
    return {"name": "fp32_fma_chain", "precision": "fp32", "value": fl / (ms * 1e9), "unit": "TFLOP/s",
            "detail": f"Triton FMA chains, {programs} programs x {FMA_BLOCK} elements x {FMA_CHAINS} chains x {FMA_ITERS} steps"}


def _cublas_peak(prec: str, sizes, reps: int, flush) -> dict:
    """The best cuBLAS rate of one precision over sizes^3 and its layouts (fp8: NT per-tensor,
    fast accumulation off and on)."""
    import torch

    from .harness import Operands, Timer, quantiles
    from .measure import make_call
    from .plan import FAST_ACCUM, Entry
    from .registry import SCALED

    scaled = prec in SCALED
    variants = [("NT", "baseline"), ("NT", FAST_ACCUM)] if scaled else [("NN", "baseline"), ("NT", "baseline")]
    best, where = 0.0, ""
    for n in sizes:
        ops = Operands(n, n, n, prec, seed=1)
        for layout, kind in variants:
            entry = Entry("cublas", "cublas", prec, layout, kind, scaling="tensor" if scaled else "")
            t = Timer(make_call(entry), ops, layout, flush)
            t.warm()
            for _ in range(reps):
                t.queue()
            torch.cuda.synchronize()
            t.collect()
            ms = quantiles(t.samples)[0]
            tf = 2.0 * n ** 3 / (ms * 1e9)
            if tf > best:
                best, where = tf, f"{n}^3 {layout}" + (" fast accumulation" if kind == FAST_ACCUM else "")
            t.release()
        del ops
    how = "NT per-tensor, fast accumulation off/on" if scaled else "NN/NT"
    return {"name": f"cublas_{prec}", "precision": prec, "value": best, "unit": "TFLOP/s",
            "detail": f"best cuBLAS {prec} of {', '.join(f'{n}^3' for n in sizes)} {how}: {where}"}


def cublas_peaks(sizes=(4096, 8192), reps: int = 10) -> list:
    """cublas_<p> for every precision; one that fails (fp8 before sm_89) is recorded as failed."""
    from .harness import L2Flush
    from .registry import PRECISIONS

    flush, rows = L2Flush(), []
    for prec in PRECISIONS:
        try:
            rows.append(_cublas_peak(prec, sizes, reps, flush))
        except Exception as exc:  # the roofline falls back to the datasheet for this precision
            rows.append({"name": f"cublas_{prec}", "precision": prec, "value": float("nan"), "unit": "",
                         "detail": f"failed: {type(exc).__name__}: {exc}"[:200]})
    return rows


def datasheet_rows(gpu: str) -> list:
    label, ds = datasheet_entry(gpu)
    rows = [{"name": f"datasheet_{k}", "precision": "memory" if k == "bandwidth" else k, "value": v,
             "unit": "TB/s" if k == "bandwidth" else "TFLOP/s", "detail": f"{label} datasheet (dense)"}
            for k, v in ds.items()]
    for r in rows:
        r["source"] = "datasheet"
    return rows


def measure(gpu: str, quick: bool = False) -> pd.DataFrame:
    """All ceilings of this GPU; a failing measurement is recorded with its reason and skipped."""
    import torch

    rows = []
    for fn in (copy_bandwidth, fma_peak, lambda: cublas_peaks(sizes=(4096, 8192), reps=5 if quick else 10)):
        try:
            got = fn()
            rows += got if isinstance(got, list) else [got]
        except Exception as exc:  # a missing ceiling falls back to the datasheet in the roofline
            rows.append({"name": getattr(fn, "__name__", "cublas_peaks"), "precision": "", "value": float("nan"),
                         "unit": "", "detail": f"failed: {type(exc).__name__}: {exc}"[:200]})
    for r in rows:
        r["source"] = "measured"
    torch.cuda.empty_cache()
    df = pd.DataFrame(rows + datasheet_rows(gpu))
    df.insert(0, "gpu", gpu)
    return df[["gpu", "name", "source", "precision", "value", "unit", "detail"]]
