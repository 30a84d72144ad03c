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

from .journal import sources_digest
from .registry import ROOT

# Untracked (not ignored) files here make the tree dirty: stage files and the harness.
UNTRACKED_DIRTY = ("cuda_src", "triton_kernels", "study")


def _out(cmd) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def git_dirty() -> bool:
    """True when tracked files differ from HEAD, or when untracked (not ignored) files lie under
    the stage and harness folders: a new stage file runs in the study before it is committed."""
    if _out(["git", "status", "--porcelain", "--untracked-files=no"]):
        return True
    return bool(_out(["git", "ls-files", "--others", "--exclude-standard", "--", *UNTRACKED_DIRTY]))


def cuda_uuid() -> str | None:
    """"GPU-xxxxxxxx-..." (nvidia-smi's spelling) of the CUDA device the study measures (the
    current one: 0 unless changed), or None without a GPU or a torch that reports it."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        u = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "uuid", None)
    except Exception:
        return None
    if u is None:
        return None
    u = str(u)
    return u if u.startswith(("GPU-", "MIG-")) else f"GPU-{u}"


def _same_uuid(a: str, b: str) -> bool:
    def norm(x):
        x = x.strip().lower()
        return x[4:] if x.startswith(("gpu-", "mig-")) else x
    return bool(a) and bool(b) and norm(a) == norm(b)


def smi_pick(lines, uuid: str | None) -> list | None:
    """The fields after the uuid of the nvidia-smi line (--query-gpu=uuid,...) whose uuid is
    `uuid`; the first line's when uuid is None (no torch UUID: nvidia-smi's GPU 0); None when no
    line matches (CUDA_VISIBLE_DEVICES and nvidia-smi's PCI order may differ: never guess)."""
    for line in lines:
        parts = [x.strip() for x in line.split(",")]
        if len(parts) < 2:
            continue
        if uuid is None or _same_uuid(parts[0], uuid):
            return parts[1:]
    return None


def _loaded(name: str) -> list:
    """Paths of the shared libraries this process has mapped whose file name holds `name`."""
    try:
        with open("/proc/self/maps") as f:
            return sorted({ln.split()[-1] for ln in f if name in ln.rsplit("/", 1)[-1]})
    except OSError:
        return []


def cublas_version() -> dict:
    """{"cublas": version, "cublas_source": where from}: cublasLtGetVersion() of the libcublasLt
    this process loaded (torch's), else the nvidia-cublas wheel's version; else
    {"cublas_unknown_cuda_runtime_torch": torch.version.cuda} (the runtime torch was built for,
    not cuBLAS's own version)."""
    import ctypes

    for lib in _loaded("libcublasLt.so"):
        try:
            fn = ctypes.CDLL(lib).cublasLtGetVersion
            fn.restype = ctypes.c_size_t
            v = int(fn())
        except (OSError, AttributeError):
            continue
        if v > 0:
            return {"cublas": f"{v // 10000}.{v // 100 % 100}.{v % 100}", "cublas_source": f"cublasLtGetVersion ({lib})"}
    from importlib import metadata

    for dist in ("nvidia-cublas-cu12", "nvidia-cublas-cu13", "nvidia-cublas-cu11", "nvidia-cublas"):
        try:
            return {"cublas": metadata.version(dist), "cublas_source": f"pip package {dist}"}
        except metadata.PackageNotFoundError:
            continue
    import torch

    return {"cublas_unknown_cuda_runtime_torch": torch.version.cuda}


def settings_fields(settings) -> dict:
    """The study's measure.Settings as a dict, and its operand seed, for environment.json."""
    from dataclasses import asdict

    d = asdict(settings)
    return {"settings": d, "seed": d.get("seed")}


def collect(settings=None) -> dict:
    """Everything a reader needs to place the numbers: one flat dict for environment.json (with
    settings, a measure.Settings: its fields and seed too)."""
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
                     else git_dirty(),
        "nvcc": (_out(["nvcc", "--version"]).splitlines() or [""])[-1],
        # The bytes measured, whatever git says (a copy's .git can lag its files): journal.py's
        # digest of the stage files and study/; `python -m study sources` prints the tree's.
        "sources_sha1": sources_digest()[:16],
    }
    env.update(cublas_version())
    if settings is not None:
        env.update(settings_fields(settings))
    if device.capability() is not None:
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update({
            "gpu_full_name": p.name, "compute_capability": f"{p.major}.{p.minor}",
            "sms": p.multi_processor_count, "memory_gib": round(p.total_memory / 2**30, 1),
            "l2_mib": round(getattr(p, "L2_cache_size", 0) / 2**20, 1),
        })
        uuid = cuda_uuid()
        env["gpu_uuid"] = uuid
        q = _out(["nvidia-smi", "--query-gpu=uuid,driver_version,clocks.max.sm,power.limit",
                  "--format=csv,noheader,nounits"])
        parts = smi_pick(q.splitlines(), uuid)
        if parts:
            env.update(dict(zip(["driver", "sm_clock_max_mhz", "power_limit_w"], parts)))
    return env


INSTANT_POWER = "power.draw.instant"


def power_averaged(env: dict) -> bool:
    """Whether a run's power_w came from nvidia-smi's one-second average (every run before the
    sampler asked for INSTANT_POWER, and boards without it)."""
    return env.get("power_field") != INSTANT_POWER


class ClockSampler:
    """Samples the SM clock and the board power every `period_s` in a thread: nvidia-smi (the GPU
    whose UUID is the measured CUDA device's), else the clock alone from torch.cuda.clock_rate.
    `during(t0, t1)` gives the medians over a window (a shape's timed rounds), `latest()` the
    last sample."""

    def __init__(self, period_s: float = 0.1):
        self.period_s, self._stop = period_s, threading.Event()
        self.samples: list = []  # (time.time() of the sample, SM MHz, board W or nan)
        self._proc, self._thread, self.uuid, self.power_field = None, None, None, None

    @staticmethod
    def _power_query(smi: str) -> str:
        """power.draw.instant where this nvidia-smi knows it: plain power.draw is a one-second
        average on recent drivers (Hopper, R535+), too slow for a shape's sub-second rounds (the
        8192^3 16-bit rows read ~380 W beside 690 W at 4096^3 in the runs of 2026-11-26)."""
        try:
            p = subprocess.run([smi, f"--query-gpu={INSTANT_POWER}", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=20)
            float(p.stdout.split()[0].strip(","))
            return INSTANT_POWER if p.returncode == 0 else "power.draw"
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return "power.draw"

    def start(self):
        smi = shutil.which("nvidia-smi")
        if smi:
            # Every GPU's line, kept by UUID: nvidia-smi's index 0 (PCI order) need not be CUDA's
            # device 0 (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER).
            self.uuid, self.power_field = cuda_uuid(), self._power_query(smi)
            self._proc = subprocess.Popen(   # timestamp: when nvidia-smi sampled, not when its line came
                [smi, f"--query-gpu=uuid,clocks.sm,{self.power_field},timestamp", "--format=csv,noheader,nounits",
                 "-lms", str(int(self.period_s * 1000))], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self._thread = threading.Thread(target=self._read_smi, daemon=True)
        else:
            self._thread = threading.Thread(target=self._poll_torch, daemon=True)
        self._thread.start()
        return self

    def _read_smi(self):
        first = None   # without a CUDA UUID: the first GPU nvidia-smi lists, as before
        for line in self._proc.stdout:
            parts = [x.strip() for x in line.split(",")]
            if len(parts) < 2:
                continue
            if self.uuid is None:
                first = first or parts[0]
                if parts[0] != first:
                    continue
            elif not _same_uuid(parts[0], self.uuid):
                continue
            try:
                mhz = float(parts[1])
            except ValueError:
                continue
            try:
                watts = float(parts[2])
            except (IndexError, ValueError):  # "[N/A]" on boards that do not report power
                watts = math.nan
            self.samples.append((_stamp(parts[3] if len(parts) > 3 else ""), mhz, watts))

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
        return {"sm_clock_samples": len(vals), "power_field": self.power_field, "sm_clock_min_mhz": min(vals),
                "sm_clock_median_mhz": statistics.median(vals), "sm_clock_max_mhz_seen": max(vals)}


def _stamp(text: str) -> float:
    """nvidia-smi's timestamp ("2026/11/26 01:29:55.123", local time) as time.time(); now if absent
    or unreadable."""
    try:
        return datetime.datetime.strptime(text.strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
    except ValueError:
        return time.time()
