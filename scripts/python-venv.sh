#!/usr/bin/env bash
# Creates (or updates) the Python virtual environment the cross-language tests use: the official
# OpenAI, Anthropic and MCP SDKs as real clients and servers, pytest, and maturin to build the
# Python package. Idempotent. Prints the venv's python path on its last line.
#
#   bash scripts/python-venv.sh            # venv at .venv (ignored by git)
#   CTXGC_VENV=/tmp/v bash scripts/python-venv.sh
#
# Tests find the interpreter through CTXGC_TEST_PYTHON, or .venv/bin/python when that exists;
# without either they skip with a note (and fail under CI / CTXGC_REQUIRE_SERVICES=1).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${CTXGC_VENV:-$PWD/.venv}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv" >&2
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
    'openai>=1.50,<3' 'anthropic>=0.40,<1' 'mcp>=1.9,<2' 'pydantic>=2,<3' \
    'pytest>=8,<10' 'maturin>=1.7,<2' 'httpx>=0.27,<1' >&2
echo "$venv/bin/python"
