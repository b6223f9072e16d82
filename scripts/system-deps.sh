#!/usr/bin/env bash
# System packages the test suite and media downloads need: ffmpeg (yt-dlp remuxes HLS and merges
# separate audio/video streams with it).
# Installs Debian's package when missing and we are root; fails with a clear message otherwise.
set -euo pipefail

# chromium: crawl/render.py drives Debian's build through Playwright (`playwright install` cannot
# download here).
if command -v chromium >/dev/null; then
  echo "system-deps: chromium already installed ($(command -v chromium))"
elif [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "system-deps: chromium is missing; install it (Debian: apt-get install chromium) and re-run" >&2
  exit 1
else
  echo "system-deps: installing chromium with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get install -y -qq --no-install-recommends chromium >/dev/null
  command -v chromium >/dev/null || { echo "system-deps: apt-get ran but chromium is still not on PATH" >&2; exit 1; }
  echo "system-deps: installed chromium ($(chromium --version 2>/dev/null | head -1))"
fi

if command -v ffmpeg >/dev/null; then
  echo "system-deps: ffmpeg already installed ($(command -v ffmpeg))"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "system-deps: ffmpeg is missing; install it (Debian: apt-get install ffmpeg) and re-run" >&2
  exit 1
fi
echo "system-deps: installing ffmpeg with apt-get"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null
command -v ffmpeg >/dev/null || { echo "system-deps: apt-get ran but ffmpeg is still not on PATH" >&2; exit 1; }
echo "system-deps: installed ffmpeg ($(ffmpeg -version | head -1))"
