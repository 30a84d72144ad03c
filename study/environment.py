"""The run's environment (GPU, driver, toolchain, commit, date), and the SM clock and board power
seen during it."""
from __future__ import annotations

import datetime
import math
import os
import platform
import shutil
import statistics
import subprocess
import threading
import time

from .registry import ROOT


def _out(cmd) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def collect() -> dict:
    """Everything a reader needs to place the numbers: one flat dict for environment.json."""
    import torch
    import triton

    from . import device

    env = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "gpu": device.gpu_name(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda_torch": torch.version.cuda,
        # A copy of the tree without .git (a remote GPU box) passes the commit in STUDY_GIT_COMMIT.
        "git_commit": os.environ.get("STUDY_GIT_COMMIT") or _out(["git", "rev-parse", "--short=12", "HEAD"]),
        "git_dirty": (os.environ.get("STUDY_GIT_DIRTY", "") == "1") if os.environ.get("STUDY_GIT_COMMIT")
                     else bool(_out(["git", "status", "--porcelain", "--untracked-files=no"])),
        "nvcc": (_out(["nvcc", "--version"]).splitlines() or [""])[-1],
    }
    if device.capability() is not None:
        p = torch.cuda.get_device_properties(0)
        env.update({
            "gpu_full_name": p.name, "compute_capability": f"{p.major}.{p.minor}",
            "sms": p.multi_processor_count, "memory_gib": round(p.total_memory / 2**30, 1),
            "l2_mib": round(getattr(p, "L2_cache_size", 0) / 2**20, 1),
        })
        q = _out(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,power.limit",
                  "--format=csv,noheader,nounits", "-i", "0"])
        if q:
            parts = [x.strip() for x in q.split(",")]
            env.update(dict(zip(["driver", "sm_clock_max_mhz", "power_limit_w"], parts)))
    return env


class ClockSampler:
    """Samples the SM clock and the board power every `period_s` in a thread: nvidia-smi, else
    the clock alone from torch.cuda.clock_rate. `during(t0, t1)` gives the medians over a
    window (a shape's timed rounds), `latest()` the last sample."""

    def __init__(self, period_s: float = 0.1):
        self.period_s, self._stop = period_s, threading.Event()
        self.samples: list = []  # (time.time(), SM MHz, board W or nan)
        self._proc, self._thread = None, None

    def start(self):
        smi = shutil.which("nvidia-smi")
        if smi:
            self._proc = subprocess.Popen(
                [smi, "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-i", "0",
                 "-lms", str(int(self.period_s * 1000))], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self._thread = threading.Thread(target=self._read_smi, daemon=True)
        else:
            self._thread = threading.Thread(target=self._poll_torch, daemon=True)
        self._thread.start()
        return self

    def _read_smi(self):
        for line in self._proc.stdout:
            parts = [x.strip() for x in line.split(",")]
            try:
                mhz = float(parts[0])
            except ValueError:
                continue
            try:
                watts = float(parts[1])
            except (IndexError, ValueError):  # "[N/A]" on boards that do not report power
                watts = math.nan
            self.samples.append((time.time(), mhz, watts))

    def _poll_torch(self):
        import torch

        while not self._stop.is_set():
            try:
                self.samples.append((time.time(), float(torch.cuda.clock_rate()), math.nan))
            except Exception:
                return
            time.sleep(self.period_s)

    @staticmethod
    def _medians(samples) -> dict:
        if not samples:
            return {"sm_mhz": math.nan, "power_w": math.nan}
        watts = [w for _, _, w in samples if not math.isnan(w)]
        return {"sm_mhz": statistics.median(m for _, m, _ in samples),
                "power_w": statistics.median(watts) if watts else math.nan}

    def latest(self) -> dict:
        return self._medians(self.samples[-1:])

    def during(self, t0: float, t1: float) -> dict:
        """Medians of the samples taken between t0 and t1 (time.time()); the latest sample when
        the window was too short to hold one."""
        inside = [x for x in self.samples if t0 <= x[0] <= t1]
        return self._medians(inside) if inside else self.latest()

    def stop(self) -> dict:
        self._stop.set()
        if self._proc:
            self._proc.terminate()
            self._proc.wait(timeout=5)
        vals = [mhz for _, mhz, _ in self.samples]
        if not vals:
            return {"sm_clock_samples": 0}
        return {"sm_clock_samples": len(vals), "sm_clock_min_mhz": min(vals),
                "sm_clock_median_mhz": statistics.median(vals), "sm_clock_max_mhz_seen": max(vals)}
