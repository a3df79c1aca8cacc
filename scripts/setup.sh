#!/usr/bin/env bash
# Creates .venv and installs unity_rl with everything the tests and the main job need.
# Idempotent: a second run with an unchanged pyproject.toml returns at once.
# PYTHON: the interpreter (3.10-3.13; default python3). UNITY_RL_VENV: the venv folder
# (default .venv; scripts/check_pythons.sh uses temporary ones).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${UNITY_RL_EXTRAS:-dev,ray,replay,pettingzoo}
VENV=${UNITY_RL_VENV:-.venv}
stamp=$VENV/.unity_rl_setup
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1) $EXTRAS"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e ".[$EXTRAS]"
# mlagents-envs' declared requirements cannot be resolved (DESIGN §3): install it alone.
"$VENV/bin/python" -m pip install -q --no-deps --ignore-requires-python mlagents-envs==1.1.0
# mlagents-envs' protoc-3 message modules load on protobuf 7 only through unity_rl's import hook
# (unity_rl/envs/protocol.py). `import unity_rl` installs it; this .pth installs it at every
# start of this venv's interpreter, so that a plain `import mlagents_envs` works too.
site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
printf '%s\n' 'import sys; exec("try:\n    import unity_rl.envs.protocol\nexcept ImportError:\n    pass")' \
  > "$site/unity_rl_protobuf.pth"
echo "$want" > "$stamp"
