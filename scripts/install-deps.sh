#!/usr/bin/env bash
# Installs what building and testing Kestrel needs on Debian 12 (run as root or with sudo).
# Idempotent: packages already present are left as they are.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
packages=(build-essential clang cmake ninja-build pkg-config python3 curl ca-certificates
          libabsl-dev libfmt-dev catch2 libbenchmark-dev nlohmann-json3-dev
          libpcre2-dev libutf8proc-dev libsimde-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
