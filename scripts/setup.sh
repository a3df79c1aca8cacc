#!/usr/bin/env bash
# Creates .venv and installs unity_rl with everything the tests and the main job need.
# Idempotent: a second run with an unchanged pyproject.toml returns at once.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${UNITY_RL_EXTRAS:-dev,ray,replay}
stamp=.venv/.unity_rl_setup
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1) $EXTRAS"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[$EXTRAS]"
# mlagents-envs' declared requirements cannot be resolved (DESIGN §3): install it alone.
.venv/bin/python -m pip install -q --no-deps --ignore-requires-python mlagents-envs==1.1.0
echo "$want" > "$stamp"
