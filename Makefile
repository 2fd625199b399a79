# Two set-up commands: `make run` (demo, GUI or headless) and `make test`.
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TSTAMP := $(VENV)/.installed-test

.PHONY: run test venv clean gpu-test bench

$(VPY):
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip

# torch==2.13.0 first: on these machines it is a CPU build on local disk; a bare range would pull a multi-GB CUDA build.
$(STAMP): $(VPY) pyproject.toml
	$(VPY) -c "import torch" 2>/dev/null || $(VPY) -m pip install -q torch==2.13.0 || $(VPY) -m pip install -q torch
	$(VPY) -m pip install -q -e .
	touch $@

$(TSTAMP): $(STAMP)
	$(VPY) -m pip install -q -e ".[test]"
	touch $@

venv: $(STAMP)

run: $(STAMP)
	$(VPY) -m dpd_desktop demo

test: $(TSTAMP)
	QT_QPA_PLATFORM=offscreen $(VPY) -m pytest -q

gpu-test: $(TSTAMP)
	$(VPY) -m pytest -q tests/gpu

clean:
	rm -rf $(VENV) build *.egg-info
