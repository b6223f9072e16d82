#!/usr/bin/env bash
# Flower, the Celery monitor, behind basic auth. Flower can shut workers down and revoke tasks, so it
# refuses to start without FLOWER_BASIC_AUTH=user:password (several: user1:pw1,user2:pw2).
# FLOWER_ADDRESS (default 127.0.0.1) and FLOWER_PORT (default 5555) choose where it listens;
# PYTHON picks the interpreter (default: python on PATH). Extra arguments go to flower.
# The credentials stay in the environment, where Flower reads FLOWER_BASIC_AUTH itself: a command line
# is visible to every user of the machine (ps, /proc/PID/cmdline).
set -euo pipefail

auth="${FLOWER_BASIC_AUTH:-}"
if [ -z "$auth" ] || [[ "$auth" != *:* ]]; then
  echo "flower: refusing to start without basic auth; set FLOWER_BASIC_AUTH=user:password" >&2
  exit 2
fi
exec "${PYTHON:-python}" -m celery -A crawlproject flower \
  --address="${FLOWER_ADDRESS:-127.0.0.1}" \
  --port="${FLOWER_PORT:-5555}" \
  "$@"
