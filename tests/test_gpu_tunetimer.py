"""The Triton autotuners' timer (study.tunetimer.queued_bench; marker gpu): a call whose host time
dwarfs its GPU time reads its GPU time, where triton.testing.do_bench reads the host's."""
import time

import pytest
import torch
import triton

from study.tunetimer import queued_bench

pytestmark = pytest.mark.gpu


def slow_host_call():
    """2 ms on the host, then a ~16 MB elementwise kernel (a few us on an H100)."""
    x = torch.zeros(1 << 22, device="cuda")

    def call():
        time.sleep(0.002)
        x.add_(1.0)
    return call


def test_host_time_stays_out():
    call = slow_host_call()
    assert triton.testing.do_bench(call, warmup=1, rep=20) > 1.5   # do_bench reads the host's 2 ms
    assert queued_bench(call, max_reps=20) < 0.2


def test_quantiles_as_do_bench_returns_them():
    q = queued_bench(slow_host_call(), quantiles=[0.5, 0.2, 0.8], max_reps=20)
    assert isinstance(q, list) and len(q) == 3 and q[1] <= q[0] <= q[2] < 0.2
