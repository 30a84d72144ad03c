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
# The tested package set lives in requirements.txt (one place): versions, and why.

.PHONY: test test-cpu test-gpu reports sanitize env clean-build

env: $(ENV_STAMP)

# pip shows its progress bars: a first install downloads for minutes on a machine without a
# local wheel cache.
# TORCH replaces the torch pin (e.g. a CPU build: README, "Install"); the rest is installed as pinned.
TORCH ?= $(shell grep '^torch==' requirements.txt)
.venv/.study-env: requirements.txt
	$(SYSTEM_PY) -m venv .venv
	grep -v '^torch==' requirements.txt > .venv/requirements-rest.txt
	.venv/bin/pip install --progress-bar on $(TORCH) -r .venv/requirements-rest.txt
	touch $@

# The README's test command: every test; GPU tests run when a CUDA GPU is present.
# With a GPU and pytest-xdist (the GPU machine has it), GPU tests run in 4 processes.
XDIST := $(shell $(PY) -c "import xdist, torch; assert torch.cuda.is_available()" >/dev/null 2>&1 && echo "-n 4")

test: $(ENV_STAMP)
	PYTHONPATH=$(CURDIR) $(PY) -m pytest -q $(XDIST)

test-cpu: $(ENV_STAMP)
	PYTHONPATH=$(CURDIR) $(PY) -m pytest -q -m "not gpu"

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
