#!/bin/sh
# Run nox (the project's task runner) with every argument given: `./nox.sh -s demo`, `./nox.sh`.
#
# Works the same on a machine with a virtual environment active (nox is installed into it when
# missing) and on a stock system Python that refuses `pip install` (PEP 668,
# "externally-managed-environment", as on Debian 12 and Ubuntu): there nox and uv go into a
# virtual environment of the project's own, `.venv-nox`, created on first use. Debian's python3
# without the venv module gets `python3-venv` from apt when run as root.
set -eu
cd "$(dirname "$0")"

PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "nox.sh: $PYTHON not found: install Python 3.11 or newer" >&2
    exit 1
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "nox.sh: $("$PYTHON" --version 2>&1) is too old: Python 3.11 or newer is needed" >&2
    exit 1
fi

if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    VENV_PY="$VIRTUAL_ENV/bin/python"
else
    VENV=.venv-nox
    VENV_PY="$VENV/bin/python"
    if [ ! -x "$VENV_PY" ] || ! "$VENV_PY" -c '' 2>/dev/null; then
        rm -rf "$VENV"
        if ! "$PYTHON" -m venv "$VENV" >/dev/null 2>&1; then
            rm -rf "$VENV"
            if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
                minor=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
                echo "nox.sh: installing python3-venv (the venv module is missing)" >&2
                apt-get update -qq >/dev/null
                DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python$minor-venv" >/dev/null \
                    || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
            fi
            "$PYTHON" -m venv "$VENV" || {
                echo "nox.sh: could not create a virtual environment: install your Python's venv module (Debian/Ubuntu: apt install python3-venv)" >&2
                exit 1
            }
        fi
    fi
fi

if ! "$VENV_PY" -c 'import nox, uv' >/dev/null 2>&1; then
    "$VENV_PY" -m pip install -q --disable-pip-version-check nox uv
fi
exec "$VENV_PY" -m nox "$@"
