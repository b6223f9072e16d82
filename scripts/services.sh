#!/usr/bin/env bash
# Make sure the PostgreSQL and Redis the test suite uses are running on 127.0.0.1
# (installs them from Debian packages when missing and we are root; starts them when stopped).
set -euo pipefail

need_install=()
command -v pg_ctlcluster >/dev/null || need_install+=(postgresql)
command -v redis-server >/dev/null || need_install+=(redis-server)
if [ ${#need_install[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_install[@]}"
  else
    echo "please install: ${need_install[*]}" >&2; exit 1
  fi
fi

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  version=$(ls /etc/postgresql | sort -V | tail -1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
pg_isready -q -h 127.0.0.1 -p 5432 || { echo "PostgreSQL is not answering on 127.0.0.1:5432" >&2; exit 1; }

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir "${TMPDIR:-/tmp}" --logfile "${TMPDIR:-/tmp}/crawlhub-redis.log"
  for _ in $(seq 30); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.5; done
fi
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null || { echo "Redis is not answering on 127.0.0.1:6379" >&2; exit 1; }
echo "services: PostgreSQL and Redis are up on 127.0.0.1"
