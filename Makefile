# rndb — the two commands of the README, and their parts.
#   make demo   the main job on the embedded default
#   make test   installs what the tests need (a venv with maturin, pytest, mypy) and runs every test

VENV    ?= .venv
PYTHON  ?= python3
PIP      = $(VENV)/bin/pip
CARGO   ?= cargo

.PHONY: demo test test-rust test-python venv py lint bench install shootout shootout-quick

demo:
	$(CARGO) run --release -p rndb --example demo

test: test-rust test-python

test-rust:
	$(CARGO) build -p rndb-capi
	$(CARGO) build -p rndb-shell --bins
	$(CARGO) test --workspace --exclude rndb-py
	# The same process tests once more over the in-process network (transport::net):
	# the node code must behave alike over both carriers.
	RNDB_TEST_NET=local $(CARGO) test -p rndb --lib -- cluster::datapath_tests \
		cluster::mgmd_commands_tests cluster::process_tests cluster::datapath_sql_tests \
		cluster::remote_session_tests cluster::datapath_unique_tests

venv: $(VENV)/.installed-3

# -2: numpy added (tests/python/test_shootout.py); -3: cffi (the shootout's C ABI reads,
# benches/shootout/capi.py). An older venv gets them on the next make.
$(VENV)/.installed-3:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet "maturin>=1.9.4,<2" "pytest>=8" "mypy>=1.10" "numpy>=1.26" "cffi>=1.16"
	touch $@

py: venv
	$(PIP) install --quiet --force-reinstall --no-deps ./py

test-python: py
	$(VENV)/bin/python -m pytest -q tests/python

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

bench:
	$(CARGO) run --release -p rndb-benches --bin core_kv

# The key-value shootout (issue 9): installs redis, memcached, Tarantool, MariaDB and the
# Python clients, runs rndb against them on loopback, writes benches/RESULTS.md's section.
shootout:
	benches/shootout/run.sh --full

shootout-quick:
	benches/shootout/run.sh --quick

# make install PREFIX=DIR: librndb (shared and static), rndb.h, NdbApi.hpp and rndb.pc, so
# that `g++ app.cpp $(pkg-config --cflags --libs rndb)` builds with
# PKG_CONFIG_PATH=DIR/lib/pkgconfig. CAPI_BUILD/CAPI_LIBDIR let the tests install a debug build.
PREFIX      ?= /usr/local
CAPI_BUILD  ?= $(CARGO) build --release -p rndb-capi
CAPI_LIBDIR ?= target/release
CAPI_VERSION = $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)

install:
	$(CAPI_BUILD)
	install -d $(PREFIX)/lib/pkgconfig $(PREFIX)/include
	install -m 755 $(CAPI_LIBDIR)/librndb.so $(PREFIX)/lib/librndb.so
	install -m 644 $(CAPI_LIBDIR)/librndb.a $(PREFIX)/lib/librndb.a
	install -m 644 capi/include/rndb.h capi/include/NdbApi.hpp $(PREFIX)/include/
	sed -e 's|@PREFIX@|$(abspath $(PREFIX))|' -e 's|@VERSION@|$(CAPI_VERSION)|' capi/rndb.pc.in > $(PREFIX)/lib/pkgconfig/rndb.pc
