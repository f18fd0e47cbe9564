# swe-ark: `make demo` shows the whole job on data it makes itself; `make test` runs the suite.
CARGO ?= cargo
BIN := target/release/swe-ark

.PHONY: all build tools test lint fmt bench demo clean

all: build

# What the suite, the demo and the bench run besides cargo: git, GNU tar, zstd, python3.
tools:
	@bash scripts/ensure-tools.sh

build:
	$(CARGO) build --release --locked

test: tools
	$(CARGO) test --locked

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# Pack/unpack against tar | zstd on a generated 200 MB / 20,000-file tree; pack from a
# mirror against git archive | zstd, and mirror add/update, on a generated 2,500-commit repo.
bench: tools build
	python3 bench/bench.py --swe-ark $(BIN)
	python3 bench/bench_mirror.py --swe-ark $(BIN)

demo: tools build
	bash demo/demo.sh $(BIN)

clean:
	$(CARGO) clean
	rm -rf target/demo target/bench
