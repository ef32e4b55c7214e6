#!/usr/bin/env bash
# The project's two entry points (see README): each creates/updates .venv, then runs.
#   ./dev.sh run "task"   run a task end to end on the embedded runtime
#   ./dev.sh test [args]  run the whole test suite (extra args go to pytest)
set -euo pipefail
cd "$(dirname "$0")"

PYTHON="${PYTHON:-python3}"
VENV=.venv

ensure_venv() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
      || { echo "dev.sh: Python 3.11+ is required ($PYTHON is $("$PYTHON" -V 2>&1))" >&2; exit 2; }
    "$PYTHON" -m venv "$VENV"
  fi
  # Reinstall only when the dependency list changed (the stamp holds pyproject.toml's hash).
  local stamp="$VENV/.zerg-installed" want
  want=$(sha256sum pyproject.toml | cut -d' ' -f1)
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e '.[dev]'
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
