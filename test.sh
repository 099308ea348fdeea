#!/usr/bin/env bash
# Install what the tests need and run them: Python packages in a virtual environment (.venv);
# redis-server, nginx, nghttp2-client, chromium, docker-compose, docker.io, debootstrap,
# jpegtran and npm through apt-get when missing and we are root; html-validate through npm,
# into .venv/node (the tests start their own servers on free ports, drive Debian's Chromium
# with Playwright: no browser download, check docker/ with docker-compose, run the compose
# stack on their own dockerd, and check our markup with html-validate).
# Extra arguments go to pytest, e.g. ./test.sh -k corpus -x
set -euo pipefail
cd "$(dirname "$0")"
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || missing+=(nginx)
command -v nghttp >/dev/null 2>&1 || missing+=(nghttp2-client)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)  # checks the compose file
# the compose stack's test (-m docker): its own dockerd, stand-in images from a debootstrap base
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
command -v jpegtran >/dev/null 2>&1 || missing+=(libjpeg-turbo-progs)  # arithmetic-coded JPEGs
command -v npm >/dev/null 2>&1 || missing+=(npm)  # html-validate, which checks our markup
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: installing ${missing[*]}" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
        # the tests start their own nginx on free ports: not the packaged service on port 80
        if command -v service >/dev/null 2>&1; then service nginx stop >/dev/null 2>&1 || true; fi
    else
        echo "test.sh: missing ${missing[*]} (install them, e.g. apt-get install ${missing[*]})" >&2
    fi
fi
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
# The packages again only when pyproject.toml changed since the last install: imgwarm itself is
# installed editable, so a change to the code needs none (a fast loop stays fast).
stamp=.venv/.test-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
    touch "$stamp"
fi
# html-validate from npm, beside the Python packages (tests/serve/test_html.py)
# (9.7.1 exactly: a new rule in a later release must not fail the tests; 10 and later need a
# newer Node than Debian's. Not installed: those tests skip, or fail on CI, saying so.)
if command -v npm >/dev/null 2>&1 && [ ! -x .venv/node/node_modules/.bin/html-validate ]; then
    npm install --silent --no-audit --no-fund --prefix .venv/node html-validate@9.7.1 \
        >/dev/null || echo "test.sh: could not install html-validate with npm" >&2
fi
# Two test processes (pytest-xdist), a file's tests in one of them (its module fixtures, the
# Docker stack, are made once): most tests wait on servers, workers and browsers, and the
# suite takes half the time on two cores. Tests that measure memory run with nothing beside
# them (tests/support/alone.py). TEST_PROCESSES=0 runs them in this process.
exec .venv/bin/python -m pytest -n "${TEST_PROCESSES:-2}" --dist loadfile "$@"
