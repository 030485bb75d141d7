#!/usr/bin/env bash
# Installs what cross-building Kestrel for aarch64 and testing it under qemu-user needs on Debian 12
# (run as root or with sudo). See ../shared/docs/arm-cross.md. Idempotent: packages already present
# are left as they are, and the arm64 architecture is added only once.
#
# The arm64 -dev packages are Multi-Arch: same and install next to the amd64 ones. Catch2 is the amd64
# package only (Multi-Arch: foreign; its headers serve both builds; catch2:arm64 would remove it).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  $SUDO dpkg --add-architecture arm64
  need_update=1
fi

packages=(g++-aarch64-linux-gnu binutils-aarch64-linux-gnu qemu-user
          libabsl-dev:arm64 libfmt-dev:arm64 libbenchmark-dev:arm64
          nlohmann-json3-dev catch2 cmake ninja-build)
# Mirror every extra -dev library of the native build (scripts/install-deps.sh) as :arm64.
native_script="$(dirname "$0")/install-deps.sh"
if [ -f "$native_script" ]; then
  for p in $(grep -oE '\blib[a-z0-9.+-]+-dev\b' "$native_script" | sort -u); do
    case "$p" in
      libabsl-dev|libfmt-dev|libbenchmark-dev) ;;
      *) packages+=("$p:arm64") ;;
    esac
  done
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "${need_update:-0}" = 1 ] || [ ! -d /var/lib/apt/lists ] || \
     ! ls /var/lib/apt/lists/*_binary-arm64_Packages* >/dev/null 2>&1; then
    $SUDO apt-get update -qq
  else
    $SUDO apt-get update -qq || true
  fi
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
