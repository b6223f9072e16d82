#!/usr/bin/env bash
# System packages the test suite and media downloads need, from Debian's packages:
# - chromium: core/net/browser.py drives Debian's build through Playwright (`playwright install` cannot
#   download here);
# - ffmpeg: yt-dlp remuxes HLS and merges separate audio/video streams with it;
# - docker-compose (optional): tests/system/test_compose.py validates docker-compose.yml with it (no engine
#   needed); without it that test is skipped, so a machine without apt still runs the suite.
# Installs a missing package when we are root and apt-get exists; fails with a clear message
# otherwise, except for the optional ones, which only warn.
set -euo pipefail

# ensure PROGRAM PACKAGE required|optional
ensure() {
  local program=$1 package=$2 need=$3
  if command -v "$program" >/dev/null; then
    echo "system-deps: $program already installed ($(command -v "$program"))"
    return 0
  fi
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "system-deps: $program is missing; install it (Debian: apt-get install $package) and re-run" >&2
    [ "$need" = optional ] && return 0
    exit 1
  fi
  echo "system-deps: installing $package with apt-get"
  if ! { apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 \
      apt-get install -y -qq --no-install-recommends "$package" >/dev/null; }; then
    echo "system-deps: apt-get could not install $package" >&2
    [ "$need" = optional ] && return 0
    exit 1
  fi
  command -v "$program" >/dev/null || { echo "system-deps: apt-get ran but $program is still not on PATH" >&2; exit 1; }
  echo "system-deps: installed $package"
}

ensure chromium chromium required
ensure ffmpeg ffmpeg required
ensure docker-compose docker-compose optional
