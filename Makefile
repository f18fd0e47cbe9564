# swe-ark: `make demo` shows the whole job on data it makes itself; `make test` runs the suite.
CARGO ?= cargo
BIN := target/release/swe-ark
# The pinned uv that `make tools` installs: swe-ark's environment builds use it (test, bench,
# demo, e2e).
SWE_ARK_UV := $(CURDIR)/.tools/bin/uv
export SWE_ARK_UV

.PHONY: all build tools test lint fmt bench e2e demo clean

all: build

# What the suite, the demo and the bench run besides cargo: git, GNU tar, zstd, python3, and a
# pinned uv in .tools/bin.
tools:
	@bash scripts/ensure-tools.sh

build:
	$(CARGO) build --release --locked

# The validation tests install pytest from a local index: its wheels are fetched once, here.
# Every test binary runs, even after one failed, as many at a time as the machine has CPUs
# (at most 4; SWE_ARK_TEST_JOBS), the slowest first, and a summary of each binary's result
# ends the run (scripts/test-all.sh, scripts/test-pool.py); it fails if any did.
test: tools
	@bash scripts/fetch-test-wheels.sh
	@CARGO="$(CARGO)" bash scripts/test-all.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

# SWE_ARK_BENCH_REPO: a bare git repository for bench_dedup.py (the archive's size on a real
# history, e.g. a snapshot of sqlfluff/sqlfluff): make bench SWE_ARK_BENCH_REPO=/path/to/repo.git,
# or set it in the environment. Empty by default: that bench is skipped, with a message, as it
# is when the path does not exist.
SWE_ARK_BENCH_REPO ?=

# Pack/unpack against tar | zstd on a generated 200 MB / 20,000-file tree; pack from a
# mirror against git archive | zstd, and mirror add/update, on a generated 2,500-commit repo;
# the deduplicated store's size on 60 commits of a real repository against git's own
# packing; an offline environment build from a lock against pip install --no-index of the
# same wheels (its lock step needs PyPI once); validation throughput; replay overhead; `text`
# (BM25 and prompt) on a 6,000-file code base, and its tokenizer against Python tiktoken
# (installed into .tools/ from PyPI when it can be); release export and import against
# tar | zstd and zstd -dc | tar of the same files; two shards against one on a local Slurm
# cluster, merge against import-archive, and S3 (moto) put/get against cp.
bench: tools build
	python3 bench/bench.py --swe-ark $(BIN)
	python3 bench/bench_dedup.py --swe-ark $(BIN) --repo "$(SWE_ARK_BENCH_REPO)"
	python3 bench/bench_mirror.py --swe-ark $(BIN)
	python3 bench/bench_env.py --swe-ark $(BIN)
	python3 bench/bench_validate.py --swe-ark $(BIN)
	python3 bench/bench_replay.py --swe-ark $(BIN)
	python3 bench/bench_text.py --swe-ark $(BIN)
	python3 bench/bench_release.py --swe-ark $(BIN)
	python3 bench/bench_shard.py --swe-ark $(BIN)

# Real PyPI, end to end: lock a SWE-bench Lite dev context (marshmallow), then build it and
# run a test file with no network (unshare -n).
e2e: tools build
	bash scripts/e2e.sh $(BIN)

demo: tools build
	$(BIN) demo --dir target/demo

clean:
	$(CARGO) clean
	rm -rf target/demo target/bench
