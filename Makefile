# Every developer and CI entry point. `make test` and `make run` work on a fresh machine:
# they create .venv/ with the project and its tools first.
# The interpreter the image ships (hack/image.sh): Debian's python3.11, whose binary is linked statically and
# built with PGO and LTO. Tests and benchmarks run on it where the machine has it, so that they measure what
# production runs (here the core takes 0.88 of the time it takes on pyenv's shared-library python3, and the webhook
# serves 1.13-1.19 times the admissions); elsewhere (or without Debian's python3.11-venv) on python3.
ifeq ($(origin PYTHON),undefined)
PYTHON := $(firstword $(shell /usr/bin/python3.11 -c 'import ensurepip, venv' 2>/dev/null && echo /usr/bin/python3.11) \
                      python3)
endif
VENV := .venv
BIN := $(VENV)/bin
# Named for the interpreter: choosing another one installs again.
STAMP := $(VENV)/.installed-$(subst /,_,$(PYTHON))

.PHONY: install check test unit soak lint precommit reference bench demo run certs e2e-assets helm image karpenter-oracle karpenter-kwok flux-build chromium promtool clean fuzz krew-manifest

install: $(STAMP)

$(STAMP): pyproject.toml
	@# A .venv that another interpreter made (an older checkout's python3) is made again with this one.
	case '$(PYTHON)' in /*) test ! -x $(BIN)/python || $(BIN)/python -c \
	  'import sys; raise SystemExit(sys._base_executable != "$(PYTHON)")' || rm -rf $(VENV);; esac
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@# An editable install compiles nothing, and PYTHONDONTWRITEBYTECODE keeps it so: every run would compile the
	@# project's 580 kB first (a wheel's install compiles it, as the image's does).
	$(BIN)/python -m compileall -q -j 0 simulation sources lint webhook certs
	touch $(STAMP)

# pytest over every core (pytest-xdist); tests that must not overlap share an xdist_group.
# Hypothesis runs its small `ci` profile unless HYPOTHESIS_PROFILE says otherwise (tests/conftest.py).
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider
PARALLEL := -n auto --dist loadgroup

# Lint and the unit tests, without e2e and without the tests marked `tools` (helm, kubectl, the oracle,
# Chromium, promtool, Debian's shells): nothing is built, and a test that reaches a build unmarked fails.
check: lint
	OVERLAY_GUARD_NO_TOOL_BUILDS=1 $(PYTEST) $(PARALLEL) -m "not e2e and not tools"

# The chart tests need helm; it is built once from the Go module proxy into the cache (hack/helm.sh).
# The image tests run the OCI image of `make image`. The differential tests and `make bench` run
# Karpenter's own controller, built once from sigs.k8s.io/karpenter (hack/karpenter-oracle.sh); the e2e
# module tests/e2e/test_karpenter.py runs Karpenter's KWOK operator with the AWS provider's metrics
# controller, built the same way (hack/karpenter-kwok.sh). The Flux rendering tests hold sources/flux.py to Flux's
# own Kustomization build (github.com/fluxcd/pkg/kustomize), built the same way (hack/flux-build.sh).
# The HTML report tests render the page in Debian's chromium (hack/chromium.sh installs it); the alert
# tests run Debian's promtool (hack/promtool.sh).
# `make lint` runs first: CI calls only `make test`, and a lint failure must fail it.
# The e2e tests run after the rest, serially in their own pytest: one control plane for all of them.
test: install lint helm image karpenter-oracle karpenter-kwok flux-build chromium promtool
	$(PYTEST) $(PARALLEL) -m "not e2e"
	$(PYTEST) -m e2e tests/e2e

unit: install helm karpenter-oracle flux-build chromium promtool
	$(PYTEST) $(PARALLEL) -m "not e2e"

# Hypothesis' large profile over the unit tests, then SOAK_BATCHES fresh batches of random sets against
# Karpenter's own controller (tests/test_oracle_random.py).
SOAK_BATCHES ?= 64
# Seconds fuzz/growth.py searches for the shape whose cost grows fastest (fails past its LIMIT).
GROWTH_SECONDS ?= 600
soak: install karpenter-oracle
	HYPOTHESIS_PROFILE=soak $(PYTEST) $(PARALLEL) -m "not e2e and not tools"
	OVERLAY_GUARD_ORACLE_SOAK=$(SOAK_BATCHES) $(PYTEST) tests/test_oracle_random.py
	$(BIN)/python -m fuzz.growth --seconds $(GROWTH_SECONDS)

# docs/cli.md's code table and lint/schemas/check-output.schema.json, made from simulation/codes.py,
# and lint/schemas/simulate-output.schema.json.
reference: install
	$(BIN)/python -m lint.reference

lint: install
	$(BIN)/ruff check simulation sources lint webhook certs tests fuzz
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m lint.reference --check

# The repository's own pre-commit hooks (.pre-commit-config.yaml) on every tracked file, with the tools
# of .venv on PATH (the hooks are `language: system`). tests/test_precommit_self.py runs them too.
precommit: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pre-commit run --all-files

# Coverage-guided fuzzing (atheris/libFuzzer) of the loader, the admission handler, the core against
# tests/reference.py and the quantity parser: FUZZ_SECONDS per target, nice'd, one after another;
# corpus, crashes and logs under ${OVERLAY_GUARD_CACHE:-~/.cache/overlay-guard}/fuzz. `make test` runs
# each for a few seconds (tests/test_fuzz.py).
FUZZ_SECONDS ?= 300
fuzz: install
	$(BIN)/python -m fuzz --seconds $(FUZZ_SECONDS) --nice 10 --keep-going

# The figure of `kubectl apply` through the guard, through an echo webhook registered the same way and through
# none (docs/performance.md, "Through kubectl") needs the e2e control plane, so it stays a pytest run that
# prints its figures: .venv/bin/python -m pytest -s -p no:cacheprovider tests/e2e/test_latency.py
bench: install karpenter-oracle
	$(BIN)/python -m benchmarks

demo: install
	-$(BIN)/overlay-lint check examples/ --crd dra
	$(BIN)/overlay-lint simulate examples/ --crd dra --instance-type p5.48xlarge

helm:
	@bash hack/helm.sh >/dev/null

chromium:
	@bash hack/chromium.sh >/dev/null

promtool:
	@bash hack/promtool.sh >/dev/null

karpenter-oracle:
	@bash hack/karpenter-oracle.sh >/dev/null

karpenter-kwok:
	@bash hack/karpenter-kwok.sh >/dev/null

flux-build:
	@bash hack/flux-build.sh >/dev/null

CERTS_DIR := .certs

certs: install
	$(BIN)/python -m certs --out $(CERTS_DIR) --namespace overlay-guard

# The webhook on localhost with fresh certificates, the embedded catalog and examples/ as the
# cluster state (with the DRA-extended CRD, which examples/dra-gpu-rdma.yaml needs); prints a curl that
# sends a conflicting AdmissionReview. Ctrl-C stops it.
run: certs
	$(BIN)/python -m webhook.demo --certs $(CERTS_DIR) --state examples/ --port 9443
	$(BIN)/overlay-webhook --tls-cert-file $(CERTS_DIR)/tls.crt --tls-private-key-file $(CERTS_DIR)/tls.key \
		--host 127.0.0.1 --port 9443 --metrics-port 8080 --state examples/ --crd dra

# The OCI image without a Docker daemon: dist/overlay-guard-<version>.oci.tar from Debian's packages and
# the locked wheels (hack/image.sh); cached in ${OVERLAY_GUARD_CACHE:-$HOME/.cache/overlay-guard}/image.
image: install
	nice bash hack/image.sh build

# The krew manifest of a release: plugins/krew/overlay.template.yaml filled with the release's address and
# the sha256 of the reproducible archive, both written to dist/. Refuses to run without REPO and VERSION.
#   make krew-manifest REPO=owner/name VERSION=v0.1.0
krew-manifest:
	$(PYTHON) plugins/krew/manifest.py --repo "$(REPO)" --version "$(VERSION)" --out-dir dist

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis

-include Makefile.e2e
