"""tests/sanitize_run.py (`make sanitize`) without a GPU: the shapes each tool takes, --shapes, and
the time limit of each sanitizer run."""
import os
import subprocess
import sys
import time
from pathlib import Path

import sanitize_run as sr


def test_sanitize_run_names_its_shapes_and_limits_each_run():
    """tests/sanitize_run.py: which shapes each tool takes (racecheck of s14 on: the few-k-step
    set), --shapes overriding them, and a run past its time limit killed with its children (a
    compute-sanitizer target outlives a kill of the tool alone), its output up to then kept."""
    assert sr.shapes_for(13, "racecheck") == sr.SHAPES
    assert sr.shapes_for(14, "memcheck") == sr.SHAPES + sr.DECODE_SHAPES
    assert sr.shapes_for(15, "racecheck") == sr.SHAPES + sr.RACE_DECODE_SHAPES
    assert sr.shapes_for(14, "racecheck", "3x512x264,1x64x72") == [(3, 512, 264), (1, 64, 72)]
    hang = ("import subprocess, sys, time; print('[done] 1x64x72', flush=True); "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)")
    t = time.time()
    rc, out = sr.run_limited([sys.executable, "-c", hang], dict(os.environ), 3)
    assert rc is None and "[done] 1x64x72" in out and time.time() - t < 60
    assert sr.run_limited([sys.executable, "-c", "print('ok')"], dict(os.environ), 60) == (0, "ok\n")


def test_sanitize_run_refuses_a_shape_it_cannot_read():
    proc = subprocess.run([sys.executable, str(Path(sr.__file__)), "--shapes", "3x4"], capture_output=True, text=True)
    assert proc.returncode == 2 and "--shapes: '3x4' is not MxNxK" in proc.stderr
