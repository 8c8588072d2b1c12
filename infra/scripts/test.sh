#!/usr/bin/env bash
# Install everything the test suite needs (redis-server, Chromium and chromedriver, a Citus build
# included), start Redis if nothing answers on 127.0.0.1:6379, lint, type-check, and run the whole
# suite, fault-injection tests included (marker `faults`). Extra arguments go to pytest.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
install_memvault dev
# The SDK is its own distribution; tests/sdk runs it against the server.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT/sdk"
export HF_HUB_OFFLINE=1

redis_up() {
  "$VENV/bin/python" - <<'PY' 2>/dev/null
import redis
redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=1).ping()
PY
}

# The fault-injection tests (tests/faults) start and kill Redis servers of their own, so the binary
# is needed even when a Redis already answers on 6379.
if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing redis-server" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi

# tests/browser drives the pages in Debian's Chromium, headless, through its chromedriver (selenium,
# from the dev extras). Installed here, the browser tests must run: they fail instead of skipping.
if ! [ -x /usr/bin/chromium ] || ! [ -x /usr/bin/chromedriver ]; then
  echo "installing chromium and chromium-driver" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
fi
export MEMVAULT_REQUIRE_BROWSER=1

# tests/cluster runs memvault on a local Citus cluster (coordinator + 2 workers) built for the
# embedded PostgreSQL: a few minutes on the first run, then cached in ~/.cache/memvault.
if ! command -v gcc >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
  echo "installing gcc and make (to build Citus)" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential >/dev/null
fi
MEMVAULT_VENV="$VENV" bash "$ROOT/infra/scripts/build_citus.sh"
export MEMVAULT_REQUIRE_CITUS=1

if ! redis_up; then
  echo "starting redis-server on 127.0.0.1:6379" >&2
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /tmp --logfile /tmp/memvault-test-redis.log
  for _ in $(seq 1 50); do redis_up && break; sleep 0.1; done
  redis_up || { echo "Redis did not start; see /tmp/memvault-test-redis.log" >&2; exit 1; }
fi

"$VENV/bin/ruff" check services tests loadtests sdk
# Types of services/ and sdk/, configured in pyproject.toml ([tool.mypy]: strict where it passes).
"$VENV/bin/mypy"
"$VENV/bin/python" -m pytest "$@"
