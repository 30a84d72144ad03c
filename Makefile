# The two commands of the study. Both set up what they need on a fresh machine:
# a Python that already has torch, triton, pandas, matplotlib and pytest is used as it is
# (the GPU machine has no package registry); otherwise .venv is created with pinned packages.
SHELL := /bin/bash
SYSTEM_PY ?= python3
HAVE_DEPS := $(shell $(SYSTEM_PY) -c "import torch, triton, pandas, matplotlib, pytest" >/dev/null 2>&1 && echo yes)
ifeq ($(HAVE_DEPS),yes)
PY := $(SYSTEM_PY)
ENV_STAMP :=
else
PY := .venv/bin/python
ENV_STAMP := .venv/.study-env
endif
# torch 2.13 CPU wheel for CPU-only machines; numpy < 2.4 because the Triton interpreter
# breaks with numpy >= 2.4 (see GPU notes).
PIP_PACKAGES := torch==2.13.0 triton==3.6.0 "numpy<2.4" pandas matplotlib pytest tqdm ninja

.PHONY: test test-cpu test-gpu reports sanitize env clean-build

env: $(ENV_STAMP)

.venv/.study-env:
	$(SYSTEM_PY) -m venv .venv
	.venv/bin/pip install -q --upgrade pip
	.venv/bin/pip install -q $(PIP_PACKAGES)
	touch $@

# The README's test command: every test; GPU tests run when a CUDA GPU is present.
# With a GPU and pytest-xdist (the GPU machine has it), GPU tests run in 4 processes.
XDIST := $(shell $(PY) -c "import xdist, torch; assert torch.cuda.is_available()" >/dev/null 2>&1 && echo "-n 4")

test: $(ENV_STAMP)
	PYTHONPATH=$(CURDIR) $(PY) -m pytest -q $(XDIST)

test-gpu: $(ENV_STAMP)
	PYTHONPATH=$(CURDIR) $(PY) -m pytest -q -m gpu

# The study: measures every kernel on the local GPU and writes reports/ (QUICK=1: 3 shapes,
# fp32/tf32/fp16, fewer repeats, no ncu, written to reports/quick/ so the full tables stay).
# Without a GPU it redraws reports/ from reports/data/.
reports: $(ENV_STAMP)
	PYTHONPATH=$(CURDIR) $(PY) -m study reports $(if $(QUICK),--quick,)

# compute-sanitizer (memcheck, racecheck, synccheck) over every CUDA stage at ragged shapes.
sanitize: $(ENV_STAMP)
	PYTHONPATH=$(CURDIR) $(PY) tests/sanitize_run.py

clean-build:
	rm -rf build/
