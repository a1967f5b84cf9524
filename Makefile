# The two commands a newcomer needs: `make demo` and `make test`. Everything else is plumbing.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: all demo test deps venv tools gen lint typecheck contract-go core-coverage pytest bench faults fuzz compat soak clean testbed-up testbed-down images

all: test

## Host packages (iproute2, openssl, ...) that tests need; a no-op when already present.
deps:
	@scripts/install-deps

# pip shows setuptools' "Editable installation" note even with -q; a newcomer cannot act on it.
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@PYTHONWARNINGS='ignore:Editable installation' $(PY) -m pip install -q -e '.[dev]'
	@touch $@

venv: $(VENV)/.installed

## Third-party tools built from the Go module proxy and cached per version (see scripts/versions.env).
## A failed build does not stop the run: the tests that need that tool skip and name the reason.
tools:
	@scripts/build-tools || echo "WARNING: some test-bed tools failed to build; dependent tests will skip (see above)"

## The two product images (sriov-dra-driver, cni-shim) from Dockerfile.driver and Dockerfile.cni, on a
## Python base made from Debian packages, as OCI archives cached by a hash of their inputs
## (scripts/build_images.py, docs/images.md). A warm run only hashes the inputs.
images: deps venv
	@$(PY) scripts/build_images.py

## Generated gRPC/protobuf stubs (never committed, never hand-edited).
gen: venv
	@if [ -x scripts/gen-protos ]; then scripts/gen-protos; fi

lint: venv gen
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check . >/dev/null || { echo "ruff format would change files: run 'ruff format .'"; exit 1; }
	@out=$$($(VENV)/bin/lint-imports --no-cache --no-logo 2>&1) || { echo "$$out" | sed -n '/^Broken contracts/,$$p'; echo "import contracts broken (pyproject.toml [tool.importlinter])"; exit 1; }

typecheck: venv gen
	@$(VENV)/bin/mypy cni_shim sriov_dra sriov_contract sriov_lib sriov_operator plugins testbed tests bench $(wildcard scripts/*.py)

contract-go:
	@if [ -d tests/go/contract ]; then cd tests/go/contract && GOTOOLCHAIN=local go test ./...; fi

## The pure cores (sriov_dra/core, sriov_operator/core and the networks-annotation parser) are held
## to 100% branch coverage, each on its own tests.
core-coverage: venv gen
	@$(PY) -m pytest -q -p no:cacheprovider tests/unit/sriov_dra/core tests/unit/sriov_contract/test_networks.py \
	  tests/unit/sriov_operator/core \
	  --cov=sriov_dra.core --cov=sriov_contract.networks --cov=sriov_operator.core --cov-branch \
	  --cov-report=term-missing:skip-covered --cov-fail-under=100

## pytest exits 5 when it collected nothing: that is a failure here, never a pass.
pytest: venv gen
	@$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

test: deps venv tools lint typecheck contract-go core-coverage pytest

demo: deps venv tools gen
	@$(PY) scripts/demo.py

bench: deps venv tools gen
	@$(PY) -m bench

faults: deps venv tools gen
	@$(PY) -m pytest -m faults tests

## The differential suite against real Multus (tests/compat/), every case in thin and thick mode;
## `make test` runs its fast part (the cases not marked compat_full).
compat: deps venv tools gen
	@COMPAT_FULL=1 $(PY) -m pytest tests/compat $(PYTEST_ARGS)

## Churn soak on two real nodes with seeded kills of the driver, cni-shim-daemon and the kubelet
## (scripts/soak.py; not part of `make test`). Bounded: SOAK_PODS (200), SOAK_KILLS (15), SOAK_TIME_LIMIT (900 s).
## SOAK_SEED=<n> repeats a schedule; on a shared machine run it under the bed lock.
soak: deps venv tools gen
	@$(PY) scripts/soak.py

fuzz: venv gen
	@HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest tests -k fuzz

testbed-up: venv tools
	@scripts/testbed up

testbed-down: venv
	@scripts/testbed down

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build *.egg-info
