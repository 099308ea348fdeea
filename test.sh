#!/usr/bin/env bash
# Install what the tests need (a virtual environment in .venv) and run them.
# Extra arguments go to pytest, e.g. ./test.sh -k corpus -x
set -euo pipefail
cd "$(dirname "$0")"
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
exec .venv/bin/python -m pytest "$@"
