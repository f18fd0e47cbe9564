#!/usr/bin/env bash
# Fetches, once, the real wheels the validation tests install from their local package index:
# pytest and what it needs on Python 3.9-3.13, pinned, into .tools/test-wheels. The tests
# themselves never reach the network; they skip (saying so) when this folder is missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest="$root/.tools/test-wheels"
wheels=(
  pytest==7.4.4
  pluggy==1.3.0
  iniconfig==2.0.0
  packaging==23.2
  exceptiongroup==1.2.0
  tomli==2.0.1
)
have=0
for w in "${wheels[@]}"; do
  name=${w%%==*}
  ver=${w##*==}
  ls "$dest/${name}-${ver}-"*.whl >/dev/null 2>&1 && have=$((have + 1))
done
if [ "$have" -eq "${#wheels[@]}" ]; then
  exit 0
fi
echo "fetch-test-wheels: downloading ${wheels[*]} into $dest (from PyPI)" >&2
mkdir -p "$dest"
# No configuration from the machine (a PIP_FIND_LINKS could supply other files).
env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null \
  python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --no-deps \
  -d "$dest" "${wheels[@]}"
