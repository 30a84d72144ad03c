"""Helpers shared by the Triton stages (owned by the Triton stages s03-s09).

- `grouped_tile`: the grouped ("swizzled") program order of s07 onwards, as a @triton.jit helper.
- `autotune_do_bench` / `autotune_prune`: let @triton.autotune run under TRITON_INTERPRET=1 on a
  CPU (the interpreter has no device timer: take the first config and time nothing), and time
  with triton.testing.do_bench on a GPU.
"""
import os

import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@triton.jit
def grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Map a 1-D program id to (pid_m, pid_n) walking C in bands of GROUP_M tile rows.

    Inside a band, consecutive programs go down a column of GROUP_M tiles before moving right, so
    the programs resident at one time share GROUP_M A row-panels and ~#resident/GROUP_M B column
    panels instead of 1 A panel and #resident B panels: fewer distinct panels -> more L2 hits.
    GROUP_M == 1 gives plain row-major order. The last band may hold fewer than GROUP_M rows.
    """
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    progs_per_band = GROUP_M * grid_n
    band = pid // progs_per_band
    first_m = band * GROUP_M
    band_rows = min(grid_m - first_m, GROUP_M)  # short last band
    pid_m = first_m + (pid % progs_per_band) % band_rows
    pid_n = (pid % progs_per_band) // band_rows
    return pid_m, pid_n


def autotune_do_bench(kernel_call, quantiles):
    """do_bench for @triton.autotune: median device time on a GPU, a no-op timer in the interpreter."""
    if INTERPRET:
        kernel_call()  # run once so a bad config still fails loudly
        return [0.0 for _ in quantiles]
    # 5 ms warm-up + 25 ms of repeats per config: the study tunes ~20 shapes per stage, and
    # the ranking of configs is stable at this length (their gaps are several percent).
    return triton.testing.do_bench(kernel_call, warmup=5, rep=25, quantiles=quantiles)


def autotune_prune(configs, named_args, **kwargs):
    """early_config_prune: the interpreter (~4 ms per program per K step) only tries configs[0]."""
    return configs[:1] if INTERPRET else configs

