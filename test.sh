#!/usr/bin/env bash
# Install what the tests need and run them: Python packages in a virtual environment (.venv),
# and redis-server through apt-get when it is missing and we are root (the queue tests start
# their own on a free port). Extra arguments go to pytest, e.g. ./test.sh -k corpus -x
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v redis-server >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: installing redis-server" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    else
        echo "test.sh: redis-server is missing (install it, e.g. apt-get install redis-server)" >&2
    fi
fi
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
exec .venv/bin/python -m pytest "$@"
