# The two commands a newcomer needs: `make demo` and `make test`. Both build .venv from nothing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export RECALL_DATA_DIR ?= $(abspath ../shared/data)

.PHONY: install demo test test-all lint bench clean

$(STAMP): pyproject.toml constraints/cpu.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,cpu]' -c constraints/cpu.txt
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/recall run out_dir=runs/demo

test: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not gpu" -q

test-all: $(STAMP)
	$(BIN)/python -m pytest -q

# house rules ([tool.ruff] in pyproject.toml): lint rules, then the formatting check
LINT_PATHS := pipeline tests scripts
lint: $(STAMP)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

clean:
	rm -rf $(VENV) .cache runs outputs multirun
