#!/usr/bin/env bash
# For each Python 3.10-3.13 found here: the README set-up (scripts/setup.sh) into a temporary
# venv, then scripts/smoke.py (import, step a stand-in build, one PPO update).
# Missing interpreters are skipped with a message. Exit status: 1 if any found one failed.
#
#   bash scripts/check_pythons.sh [3.10 3.12 ...]     (KEEP=1 keeps the venvs and logs)
#
# Note: only the cp311 torch wheel may be local (pip's machine configuration); elsewhere pip
# fetches torch==2.13.0 from PyPI, whose Linux wheels pull the CUDA libraries (several GB).
set -uo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.10 3.11 3.12 3.13)
work=$(mktemp -d "${TMPDIR:-/tmp}/unity_rl_pythons.XXXXXX")
declare -A result
find_python() {
  local v=$1 p
  p=$(command -v "python$v" 2>/dev/null) && "$p" -c "" 2>/dev/null && { echo "$p"; return; }
  for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/"python$v" /usr/bin/"python$v" \
           /usr/local/bin/"python$v"; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
  return 1
}
status=0
for v in "${versions[@]}"; do
  if ! py=$(find_python "$v"); then
    echo "== Python $v: no interpreter found, skipped"
    result[$v]="skipped (not installed)"
    continue
  fi
  echo "== Python $v: $py"
  venv="$work/venv$v"
  start=$(date +%s)
  if ! UNITY_RL_VENV="$venv" PYTHON="$py" bash scripts/setup.sh > "$work/setup$v.log" 2>&1; then
    echo "   setup failed (last lines of $work/setup$v.log):"; tail -15 "$work/setup$v.log"
    result[$v]="FAILED: setup"; status=1; continue
  fi
  echo "   setup done in $(( $(date +%s) - start )) s"
  if "$venv/bin/python" scripts/smoke.py > "$work/smoke$v.log" 2>&1; then
    sed 's/^/   /' "$work/smoke$v.log" | tail -4
    result[$v]="ok ($(head -1 "$work/smoke$v.log"))"
  else
    echo "   smoke failed:"; tail -20 "$work/smoke$v.log"
    result[$v]="FAILED: smoke"; status=1
  fi
  [ "${KEEP:-0}" = 1 ] || rm -rf "$venv"
done
echo
echo "summary:"
for v in "${versions[@]}"; do echo "  $v: ${result[$v]}"; done
[ "${KEEP:-0}" = 1 ] && echo "venvs and logs kept in $work" || rm -rf "$work"
exit $status
