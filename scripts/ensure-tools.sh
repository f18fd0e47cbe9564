#!/usr/bin/env bash
# Installs, from Debian's packages, the command-line tools that the tests, the demo and the
# bench use beside cargo. Does nothing when they are all there.
set -euo pipefail
need=()
command -v git >/dev/null || need+=(git)
command -v zstd >/dev/null || need+=(zstd)
command -v python3 >/dev/null || need+=(python3)
tar --version 2>/dev/null | grep -q 'GNU tar' || need+=(tar)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "ensure-tools: installing ${need[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
