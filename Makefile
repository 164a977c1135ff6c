# The two quick-start commands are `make demo` and `make test`; both set everything up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
REFERENCE := ../shared/tools/reference-connect

.PHONY: setup demo test lint unit reference

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

demo: setup
	$(BIN)/kconnect demo

# The reference Apache Kafka Connect worker (for interop tests) needs Java 17 and its jars; without
# them those tests skip with the reason.
reference:
	@if command -v java >/dev/null 2>&1 && [ -x $(REFERENCE) ]; then \
	  PYTHON=$(BIN)/python $(REFERENCE) setup >/dev/null || echo "reference-connect setup failed; interop tests will skip"; \
	fi

# mypy cannot follow the editable install's folder mapping, so it checks a tree of links that has
# the installed shape (kconnect/runtime -> runtime/, ...).
TYPECHECK := build/typecheck
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	mkdir -p $(TYPECHECK)/kconnect
	for d in runtime rest config connectors; do ln -sfn $(CURDIR)/$$d $(TYPECHECK)/kconnect/$$d; done
	cd $(TYPECHECK) && $(CURDIR)/$(BIN)/mypy --strict --config-file $(CURDIR)/pyproject.toml -p kconnect

test: setup reference lint
	$(BIN)/pytest -q -ra
