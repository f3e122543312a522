# PageSight developer entry points. A fresh machine needs only `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := tesseract-ocr tesseract-ocr-eng tesseract-ocr-jpn tesseract-ocr-osd fonts-dejavu-core
PYTEST_ARGS ?=
export OMP_NUM_THREADS ?= 1
export OMP_THREAD_LIMIT ?= 1

.PHONY: setup system-deps demo serve test test-fast test-e2e lint typecheck format bench bench-ocr \
	bench-parse bench-maxsim bench-embed bench-gateway eval-smoke eval-ja eval-full lock clean

setup: system-deps $(STAMP)

# System packages: Tesseract with English, Japanese and orientation data.
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

test-e2e: setup
	$(BIN)/python -m pytest tests/e2e $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

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

# The exact numpy baseline gets every core (BLAS threads): the Makefile's OMP_NUM_THREADS=1
# would make it single-threaded and flatter the speed-up.
bench-maxsim: setup
	env -u OMP_NUM_THREADS $(BIN)/python bench/bench_maxsim.py --out var/bench/maxsim.json

bench-gateway: setup
	$(BIN)/python bench/bench_gateway.py --out var/bench/gateway.json

bench-embed: setup
	$(BIN)/python -m bench.bench_embed --device cpu --out var/bench/embed_cpu.json

EVAL := ../shared/eval
eval-smoke: setup
	$(BIN)/python bench/eval_retrieval.py --pdfs $(EVAL)/pdfs --questions $(EVAL)/questions.jsonl \
		--subset smoke --route text --data-dir var/eval/smoke --out var/bench/eval_smoke_text.json

eval-ja: setup
	$(BIN)/python bench/eval_retrieval.py --pdfs $(EVAL)/ja/pdfs --questions $(EVAL)/ja/questions.jsonl \
		--route text --data-dir var/eval/ja --out var/bench/eval_ja_text.json

eval-full: setup
	$(BIN)/python bench/eval_retrieval.py --pdfs $(EVAL)/pdfs --questions $(EVAL)/questions.jsonl \
		--route text --data-dir var/eval/full --out var/bench/eval_full_text.json

# Re-pin every installed package after changing dependencies in pyproject.toml.
lock:
	{ echo "# Pinned versions of everything in .venv: regenerate with 'make lock' after changing pyproject.toml."; \
	  $(BIN)/python -m pip freeze --exclude-editable | grep -v '^pagesight'; } > constraints.txt

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
