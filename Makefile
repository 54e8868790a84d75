PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SPACE ?= spaces/default.yaml

.PHONY: sweep test venv validate bench bench-model bench-sweep fit clean

$(BIN)/dse: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/dse

venv: $(BIN)/dse

sweep: venv
	$(BIN)/dse sweep $(SPACE)

test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

validate: venv
	$(BIN)/dse validate

fit: venv
	$(BIN)/python -m objectives.fit

bench: bench-model bench-sweep

bench-model: venv
	$(BIN)/python benchmarks/model_throughput.py

bench-sweep: venv
	$(BIN)/python benchmarks/sweep_throughput.py
	$(BIN)/python benchmarks/sweep_quality.py

clean:
	rm -rf $(VENV) build *.egg-info
