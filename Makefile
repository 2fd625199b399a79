# Two set-up commands: `make run` (demo, GUI or headless) and `make test`.
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TSTAMP := $(VENV)/.installed-test
# The OpenDPD reference sources that tests/unit/test_models_vs_reference.py compares against (git-ignored, from the
# package registry; none of its code is committed). Its models.py is the stamp: the tree is unpacked beside it and
# moved into place whole, so a present models.py means a complete tree and the rule does nothing.
REF_VER := 2.2.1
REF_DIR := .ref/opendpd-$(REF_VER)
REF_STAMP := $(REF_DIR)/models.py
REF_TMP := .ref/.prepare-$(REF_VER)
# OpenDPD 2.4.2, for its metric profiles and its polynomial (MP-LS) baseline (tests/unit/test_*_vs_opendpd24.py):
# the `opendpd` package alone (it imports with pydantic); its Studio's static files and arena assets are left out.
REF24_VER := 2.4.2
REF24_DIR := .ref/opendpd-$(REF24_VER)
REF24_STAMP := $(REF24_DIR)/opendpd/__init__.py
REF24_TMP := .ref/.prepare-$(REF24_VER)

.PHONY: run test venv clean gpu-test bench reference arena-data package package-test

$(VPY):
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip

# torch==2.13.0 first: on these machines it is a CPU build on local disk; a bare range would pull a multi-GB CUDA build.
$(STAMP): $(VPY) pyproject.toml
	$(VPY) -c "import torch" 2>/dev/null || $(VPY) -m pip install -q torch==2.13.0 || $(VPY) -m pip install -q torch
	$(VPY) -m pip install -q -e .
	touch $@

# the cluster extra too: tests/unit/test_ray_sweep.py runs a sweep on a real local Ray cluster
$(TSTAMP): $(STAMP)
	$(VPY) -m pip install -q -e ".[test,cluster]"
	touch $@

# The wheel's sources without its datasets' data folders, the Studio's static web files and the dist-info (the
# benchmarks add a dataset themselves; see benchmarks/bench_gpu.py).
$(REF_STAMP): | $(VPY)
	rm -rf $(REF_TMP)
	mkdir -p $(REF_TMP)
	$(VPY) -m pip download -q --no-deps -d $(REF_TMP) "opendpd==$(REF_VER)"
	$(VPY) -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
	  skip = lambda n: n.startswith(('opendpd/studio/static/', 'opendpd-')) or (n.startswith('datasets/') and n.count('/') > 1); \
	  z.extractall(sys.argv[2], [n for n in z.namelist() if not skip(n)])" $(REF_TMP)/opendpd-$(REF_VER)-*.whl $(REF_TMP)/tree
	test -f $(REF_TMP)/tree/models.py && test -d $(REF_TMP)/tree/backbones
	rm -rf $(REF_DIR)
	mv $(REF_TMP)/tree $(REF_DIR)
	rm -rf $(REF_TMP)

$(REF24_STAMP): | $(VPY)
	rm -rf $(REF24_TMP)
	mkdir -p $(REF24_TMP)
	$(VPY) -m pip download -q --no-deps -d $(REF24_TMP) "opendpd==$(REF24_VER)"
	$(VPY) -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
	  keep = lambda n: n.startswith('opendpd/') and not n.startswith(('opendpd/studio/static/', 'opendpd/arena_assets/')); \
	  z.extractall(sys.argv[2], [n for n in z.namelist() if keep(n)])" $(REF24_TMP)/opendpd-$(REF24_VER)-*.whl $(REF24_TMP)/tree
	test -f $(REF24_TMP)/tree/opendpd/__init__.py
	rm -rf $(REF24_DIR)
	mv $(REF24_TMP)/tree $(REF24_DIR)
	rm -rf $(REF24_TMP)

# OpenDPD 2.4.2's measured datasets (with their CSV data), its Arena v6 assets (capture, frozen PA, calibration,
# leaderboard) and its DeltaGRU/TRes-DeltaGRU/TCN backbones, for `dpd-desktop arena` (dpd_desktop/arena) and the tests
# that compare against them (tests/unit/test_frontier_*.py, test_arena_*.py). Git-ignored; nothing of it is committed.
ARENA_DIR := .ref/opendpd-$(REF24_VER)-arena
ARENA_STAMP := $(ARENA_DIR)/opendpd/arena_assets/reference-results-v6-apa-b.json
ARENA_TMP := .ref/.prepare-$(REF24_VER)-arena

$(ARENA_STAMP): | $(VPY)
	rm -rf $(ARENA_TMP)
	mkdir -p $(ARENA_TMP)
	$(VPY) -m pip download -q --no-deps -d $(ARENA_TMP) "opendpd==$(REF24_VER)"
	$(VPY) -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
	  keep = lambda n: n.startswith(('datasets/', 'opendpd/arena_assets/', 'backbones/', 'quant/')); \
	  z.extractall(sys.argv[2], [n for n in z.namelist() if keep(n)])" $(ARENA_TMP)/opendpd-$(REF24_VER)-*.whl $(ARENA_TMP)/tree
	test -f $(ARENA_TMP)/tree/opendpd/arena_assets/reference-results-v6-apa-b.json
	rm -rf $(ARENA_DIR)
	mv $(ARENA_TMP)/tree $(ARENA_DIR)
	rm -rf $(ARENA_TMP)

arena-data: $(ARENA_STAMP)

reference: $(REF_STAMP) $(REF24_STAMP) $(ARENA_STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(VPY) -m dpd_desktop demo

test: $(TSTAMP) $(REF_STAMP) $(REF24_STAMP) $(ARENA_STAMP)
	QT_QPA_PLATFORM=offscreen $(VPY) -m pytest -q

# the GPU tests need the cuda extra (the fast kernels' NVRTC); without it they skip, saying so (tests/gpu/conftest.py)
gpu-test: $(TSTAMP)
	$(VPY) -m pip install -q -e ".[test,cuda]"
	$(VPY) -m pytest -q tests/gpu

# The Linux bundle (PyInstaller, one folder), its .tar.gz and the .deb under build/pkg, from this checkout in a fresh
# virtual environment (build/pkg-venv); then their checks (packaging/README.md). The build takes 5-7 min here.
package:
	PY=$(PY) bash packaging/build-linux.sh

package-test:
	bash packaging/test-linux.sh

clean:
	rm -rf $(VENV) build *.egg-info
