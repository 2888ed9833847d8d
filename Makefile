# Two commands for a newcomer: `make demo` and `make test`. Both install what they need.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: install demo local test lint docs bench bench-smoke sam-build clean

# The functions' dependencies at the pins sam build deploys (functions/requirements.txt, made by
# tools/lock.py): what the tests run against is what is deployed.
# constraints.txt: the local stack's and the tests' packages as they ran (moto exactly: the stack
# patches its internals), by the same tool.
$(BIN)/.installed: pyproject.toml functions/requirements.txt constraints.txt client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c functions/requirements.txt -c constraints.txt -e '.[test]'
	touch $@

install: $(BIN)/.installed

# make lint's tools (pyproject.toml's lint extra), apart: make test neither needs nor waits for them.
$(BIN)/.lint-installed: $(BIN)/.installed
	$(BIN)/pip install --quiet -c functions/requirements.txt -c constraints.txt -e '.[test,lint]'
	touch $@

demo: install
	$(BIN)/codspeed-aggregator demo

local: install
	$(BIN)/codspeed-aggregator local

# The run page's browser tests drive Debian's chromium-headless-shell (Playwright's own browser
# download is not used): installed with apt when it is not there yet.
BROWSER ?= /usr/bin/chromium-headless-shell
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
$(BROWSER):
	$(SUDO) apt-get update -qq
	$(SUDO) apt-get install -y -qq --no-install-recommends chromium-headless-shell

# In parallel, five workers for two cores, each with a local stack of its own (pyproject.toml's
# addopts). Python caches what it compiles even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): else each of the suite's hundreds of client and local-stack processes
# compiles our modules again, and each worker rewrites every test's asserts (docs/testing.md).
test: install $(BROWSER)
	PYTHONDONTWRITEBYTECODE= CHROMIUM_HEADLESS_SHELL=$(BROWSER) $(BIN)/python -m pytest -q

# ruff's checks (pyflakes, pycodestyle, import order, bugbear, pyupgrade, McCabe complexity, too many
# arguments), its formatter and mypy, strict on functions/ and client/, at zero findings, configured
# in pyproject.toml; radon's count of complex blocks within its budget (tools/complexity.py): CI runs it
lint: $(BIN)/.lint-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/vermin -t=3.10- --violations --no-tips --quiet client/codspeed_client client/codspeed_rules
	$(BIN)/python tools/complexity.py

# The docs site into site/, every warning an error: links and anchors included (mkdocs.yml).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# bench/valgrind_rate.py runs a pytest-codspeed suite under valgrind, as CodSpeed's runner does
VALGRIND ?= /usr/bin/valgrind
$(VALGRIND):
	$(SUDO) apt-get update -qq
	$(SUDO) apt-get install -y -qq --no-install-recommends valgrind

bench: install $(VALGRIND)
	$(BIN)/python bench/merge.py
	$(BIN)/python bench/scale.py
	$(BIN)/python bench/page.py
	$(BIN)/python bench/balance.py
	$(BIN)/python bench/valgrind_rate.py
	$(BIN)/python bench/parts.py
	$(BIN)/python bench/moto_update.py
	$(BIN)/python bench/close_cost.py
	$(BIN)/python bench/record_sizes.py
	$(BIN)/python bench/cold_start.py

bench-smoke: install $(VALGRIND)
	$(BIN)/python bench/merge.py --quick
	$(BIN)/python bench/client.py --quick
	$(BIN)/python bench/load.py --quick
	$(BIN)/python bench/cold_start.py --quick
	$(BIN)/python bench/scale.py --quick
	$(BIN)/python bench/page.py --quick
	$(BIN)/python bench/balance.py --quick
	$(BIN)/python bench/valgrind_rate.py --quick
	$(BIN)/python bench/moto_update.py --quick
	$(BIN)/python bench/parts.py --quick
	$(BIN)/python bench/upload_calls.py --most 24
	$(BIN)/python bench/billing.py --quick
	$(BIN)/python bench/close_cost.py --quick
	$(BIN)/python bench/record_sizes.py --quick
	$(BIN)/python bench/growth.py --quick

# What `sam deploy` ships: the functions built for arm64 from functions/requirements.txt, with the
# SAM CLI in a virtual environment of its own (it pins packages the tests need newer).
SAM_VENV ?= .sam-venv
$(SAM_VENV)/bin/sam:
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet aws-sam-cli

# Each function's package is what its handler reaches (functions/Makefile, function_package.py).
sam-build: $(SAM_VENV)/bin/sam
	PACKAGE_PYTHON=$(abspath $(SAM_VENV))/bin/python $(SAM_VENV)/bin/sam build --no-cached
	test -n "$$(find .aws-sam/build/FinalizerFunction/isal -name '*aarch64*.so')"  # native wheels for arm64
	# bytecode for the runtime's Python, in every function: none is compiled at a cold start
	for f in ApiFunction ArrivalsFunction FinalizerFunction SweeperFunction; do \
		test -n "$$(find .aws-sam/build/$$f/codspeed_aggregator -name '*.cpython-311.pyc' -print -quit)" || exit 1; done
	# nothing local deployed: the embedded stack (moto's server, the gateway, the IAM evaluator) is not in any function
	test -z "$$(find .aws-sam/build \( -name moto_server.py -o -path '*codspeed_local*' -o -path '*/moto/*' \) -print -quit)"
	# nor the operator's commands, nor in the sweeper a library it never loads
	test -z "$$(find .aws-sam/build \( -name cli.py -o -name operator_commands.py \) -path '*codspeed_aggregator*' -print -quit)"
	test -z "$$(find .aws-sam/build/SweeperFunction -maxdepth 1 \( -name isal -o -name cryptography -o -name requests \) -print -quit)"

clean:
	rm -rf $(VENV) $(SAM_VENV) .aws-sam .pytest_cache .hypothesis site
