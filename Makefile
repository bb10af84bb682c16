# evoenv — every target works on a fresh clone: the venv is a file target built on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= train,serving,math,dev
export OMP_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
RUN ?= runs/demo

.PHONY: setup test bench demo lint clean

$(BIN)/evoenv: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first, by exact version: any looser spec can pull a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	@touch $@

setup: $(BIN)/evoenv

test: setup
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python benchmarks/bench_score.py
	$(BIN)/python benchmarks/bench_validate.py

demo: setup
	@mkdir -p $(RUN)
	$(BIN)/evoenv validate seeds/ --out $(RUN)/validate --clean
	$(BIN)/evoenv sample $(RUN)/validate --out $(RUN)/train.jsonl --per-env 8 --seed 0
	$(BIN)/evoenv preview $(RUN)/train.jsonl -n 3

lint: setup
	$(BIN)/ruff check evoenv_cli tests benchmarks seeds

clean:
	rm -rf $(RUN)
