#!/usr/bin/env bash
# Installs, from Debian's packages, the command-line tools that the tests, the demo and the
# bench use beside cargo; then a pinned uv, from PyPI, in the project's tool folder
# (.tools/bin/uv, which the Makefile hands to swe-ark as SWE_ARK_UV). Does nothing when they
# are all there.
set -euo pipefail

# The uv that builds environments (`swe-ark env build`). Pinned: a newer uv may install the
# same wheels differently, and the bench's figures should not move with it.
UV_VERSION=0.9.9

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
if [ "$("$tools/bin/uv" --version 2>/dev/null | awk '{print $2}')" = "$UV_VERSION" ]; then
  exit 0
fi
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
