#!/usr/bin/env bash
# A venv with mlagents-envs 1.1.0 as its authors pinned it (protobuf 3.20.3, pure-Python
# parsing), for benchmarks/env_throughput.py's stock loop. Never install it beside the project.
# Usage: bash benchmarks/stock_venv.sh [DIR]   (default .stock_venv; prints DIR/bin/python)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.stock_venv}
PY=${PYTHON:-python3}
if ! [ -x "$DIR/bin/python" ]; then
  "$PY" -m venv "$DIR"
  "$DIR/bin/python" -m pip install -q --upgrade pip
fi
if ! "$DIR/bin/python" -c "import mlagents_envs, google.protobuf as p; assert p.__version__ == '3.20.3'" 2>/dev/null; then
  "$DIR/bin/python" -m pip install -q "protobuf==3.20.3" numpy grpcio cloudpickle Pillow pyyaml filelock
  "$DIR/bin/python" -m pip install -q --no-deps --ignore-requires-python mlagents-envs==1.1.0
fi
echo "$DIR/bin/python"
