# hpcnet: `make run` runs the suite on this machine, `make test` runs the tests.
# Both set up what they need (virtualenv, ReFrame, hpcnet, the PyPI MPI stacks)
# and are idempotent.  Everything they create is git-ignored.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Extra arguments: make run RUN_ARGS='-n hpcnet_p2p'   make test PYTEST_ARGS='-k refs'
RUN_ARGS ?=
PYTEST_ARGS ?=

.PHONY: run test venv stacks testbed-run clean

venv: $(VENV)/.hpcnet-installed

$(VENV)/.hpcnet-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,plots]'
	touch $@

stacks: venv
	$(BIN)/hpcnet install-stacks
	$(BIN)/hpcnet stacks --refresh

run: stacks
	$(BIN)/hpcnet run $(RUN_ARGS)

test: stacks
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The Slurm virtual cluster (root): up, the suite on it, down whatever happened.
testbed-run: stacks
	$(BIN)/hpcnet testbed run $(RUN_ARGS)

clean:
	rm -rf output stage perflogs reports .state/shims .state/stacks.json
