#!/usr/bin/env bash
# Installs, from Debian's packages, the command-line tools that the tests, the demo and the
# bench use beside cargo; then a pinned uv, from PyPI, in the project's tool folder
# (.tools/bin/uv, which the Makefile hands to swe-ark as SWE_ARK_UV) and moto's S3 server
# (.tools/bin/moto_server), pyarrow (.tools/pyarrow-venv) and swebench's own task repository
# code (.tools/swebench-venv); as root with apt-get,
# Slurm and munge for the Slurm test, when it can (SWE_ARK_SKIP_SLURM=1: not). Does nothing
# when they are all there.
set -euo pipefail

# The uv that builds environments (`swe-ark env build`). Pinned: a newer uv may install the
# same wheels differently, and the bench's figures should not move with it.
UV_VERSION=0.9.9
# moto, whose server stands in for S3 in the tests and the bench.
MOTO_VERSION=5.2.5
# pyarrow, which writes the Parquet files the dataset tests read (as Hugging Face's are
# written) and reads back the ones swe-ark writes.
PYARROW_VERSION=26.0.1
# swebench, whose own task repository code (swebench.task: reading, checks, publishing) the
# task repository tests check swe-ark's reading and writing against; with PyYAML, all that
# code imports.
SWEBENCH_VERSION=5.0.2
PYYAML_VERSION=6.0.3

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/.tools"

need=()
command -v git >/dev/null || need+=(git)
command -v zstd >/dev/null || need+=(zstd)
command -v python3 >/dev/null || need+=(python3)
tar --version 2>/dev/null | grep -q 'GNU tar' || need+=(tar)
# `python3 -m venv` with pip: Debian splits it out of python3.
if command -v python3 >/dev/null && ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  need+=(python3-venv)
fi
if [ ${#need[@]} -ne 0 ]; then
  echo "ensure-tools: installing ${need[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
  else
    SUDO=
  fi
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

# uv, pinned, in its own virtual environment; .tools/bin/uv links to it.
if [ "$("$tools/bin/uv" --version 2>/dev/null | awk '{print $2}')" != "$UV_VERSION" ]; then
  echo "ensure-tools: installing uv $UV_VERSION in $tools (from PyPI)" >&2
  rm -rf "$tools/uv-venv"
  python3 -m venv "$tools/uv-venv"
  "$tools/uv-venv/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"
  mkdir -p "$tools/bin"
  ln -sfn ../uv-venv/bin/uv "$tools/bin/uv"
  got=$("$tools/bin/uv" --version | awk '{print $2}')
  if [ "$got" != "$UV_VERSION" ]; then
    echo "ensure-tools: $tools/bin/uv is uv $got, not $UV_VERSION" >&2
    exit 1
  fi
fi

# A pinned Python tool in a virtual environment of its own, .tools/NAME-venv, for python3: made
# anew unless `python -c CHECK` there prints WANT. Then each further argument is one
# `uv pip install` (its words split: options and requirements). uv, not venv and pip: pip's
# own install into each environment and its byte-compiling took most of a minute of CPU.
pinned_venv() {
  local name=$1 check=$2 want=$3
  shift 3
  local venv="$tools/$name-venv"
  if [ "$("$venv/bin/python" -c "$check" 2>/dev/null)" = "$want" ]; then
    return
  fi
  echo "ensure-tools: installing $name ($want) in $venv (from PyPI)" >&2
  rm -rf "$venv"
  "$tools/bin/uv" venv -q --python "$(command -v python3)" "$venv"
  local install
  for install in "$@"; do
    # shellcheck disable=SC2086 # an install's words are meant to split
    "$tools/bin/uv" pip install -q --python "$venv/bin/python" $install
  done
}

# moto's S3 server: the real S3 API on 127.0.0.1 the S3 tests and the bench talk to
# (.tools/bin/moto_server links to it).
pinned_venv moto 'import moto; print(moto.__version__)' "$MOTO_VERSION" \
  "moto[server]==$MOTO_VERSION"
mkdir -p "$tools/bin"
ln -sfn ../moto-venv/bin/moto_server "$tools/bin/moto_server"

# pyarrow (tests/dataset.rs runs its python).
pinned_venv pyarrow 'import pyarrow; print(pyarrow.__version__)' "$PYARROW_VERSION" \
  "pyarrow==$PYARROW_VERSION"

# swebench, without the dependencies its harness needs (docker, datasets, …): its
# swebench.task modules need only PyYAML (tests/taskrepo.rs runs its python).
pinned_venv swebench 'import swebench, yaml; print(swebench.__version__, yaml.__version__)' \
  "$SWEBENCH_VERSION $PYYAML_VERSION" "PyYAML==$PYYAML_VERSION" \
  "--no-deps swebench==$SWEBENCH_VERSION"

# Slurm and munge, for the Slurm test (scripts/slurm-local.sh runs a one-node cluster on this
# machine). Optional: only as root with apt-get, never fatal; SWE_ARK_SKIP_SLURM=1 skips it.
slurm_installed() {
  local tool
  for tool in slurmctld slurmd sbatch munged; do
    PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" >/dev/null 2>&1 || return 1
  done
}
if [ -z "${SWE_ARK_SKIP_SLURM:-}" ] && ! slurm_installed && [ "$(id -u)" -eq 0 ] &&
  command -v apt-get >/dev/null; then
  slurm=(slurmctld slurmd slurm-client munge)
  echo "ensure-tools: installing ${slurm[*]} (for the Slurm test)" >&2
  apt_slurm() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${slurm[@]}" \
      >/dev/null 2>&1
  }
  # The package lists are fetched only when the install fails without them.
  if ! apt_slurm && ! { apt-get update -qq >/dev/null 2>&1 && apt_slurm; }; then
    echo "ensure-tools: could not install Slurm; the Slurm test will skip" >&2
  fi
fi
exit 0
