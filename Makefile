PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SPACE ?= spaces/default.yaml

.PHONY: sweep test docs venv validate bench bench-model bench-sweep fit clean

$(BIN)/dse: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(BIN)/dse

venv: $(BIN)/dse

sweep: venv
	$(BIN)/dse sweep $(SPACE)

# the tests include tests/test_docs.py, which builds the documentation site as `make docs` does (-W)
test: venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

# the documentation site (Sphinx, MyST Markdown), warnings as errors: docs/_build/html/index.html
docs: venv
	$(BIN)/sphinx-build -W --keep-going -b html docs docs/_build/html

validate: venv
	$(BIN)/dse validate

fit: venv
	$(BIN)/python -m objectives.fitting.fit

bench: bench-model bench-sweep

bench-model: venv
	$(BIN)/python benchmarks/model_throughput.py

bench-sweep: venv
	$(BIN)/python benchmarks/sweep_throughput.py
	$(BIN)/python benchmarks/sweep_quality.py

clean:
	rm -rf $(VENV) build *.egg-info docs/_build
