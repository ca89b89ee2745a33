#!/usr/bin/env bash
# Print the path of a uv of the version pinned in requirements/uv.txt, so that the lock is always
# written and read by the same uv: $UV or the `uv` on PATH when it is that version, else one
# installed with pip (hash-checked, from the package index) into .tools/uv/ (git-ignored).
# Used by .ci/run and tools/update-lock.sh. Messages go to stderr; stdout is the path alone.
set -euo pipefail
case "${1:-}" in
  "") ;;
  -h | --help) sed -n '2,5s/^# //p' "${BASH_SOURCE[0]}" && exit 0 ;;
  *) echo "error: $1: tools/ensure-uv.sh takes no argument (--help says what it does)" >&2 && exit 2 ;;
esac
cd "$(dirname "${BASH_SOURCE[0]}")/.."

want="$(sed -n 's/^uv==\([^ ;]*\).*/\1/p' requirements/uv.txt)"
if [ -z "$want" ]; then
  echo "error: requirements/uv.txt: no 'uv==<version>' line" >&2
  exit 1
fi

version_of() { "$1" --version 2>/dev/null | awk '{print $2}'; }

for candidate in "$(command -v -- "${UV:-}" || true)" "$(command -v uv || true)" "$PWD/.tools/uv/bin/uv"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] && [ "$(version_of "$candidate")" = "$want" ]; then
    echo "$candidate"
    exit 0
  fi
done

echo "installing uv $want (pip, hash-checked) into .tools/uv" >&2
rm -rf .tools/uv
python3 -m venv .tools/uv
.tools/uv/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes \
  -r requirements/uv.txt >&2
if [ "$(version_of .tools/uv/bin/uv)" != "$want" ]; then
  echo "error: .tools/uv/bin/uv is not uv $want after installing requirements/uv.txt" >&2
  exit 1
fi
echo "$PWD/.tools/uv/bin/uv"
