#!/usr/bin/env bash
# Installs the Debian packages sky needs to build and test, only those that are missing.
set -euo pipefail
# Boost 1.81 (Asio's per-operation cancellation, as_tuple, deferred, parallel_group need >= 1.80;
# libboost1.81-dev replaces Debian's default 1.74), Boost.Stacktrace for crash reports.
packages=(build-essential cmake ninja-build pkg-config libboost1.81-dev libboost-stacktrace1.81-dev
  nlohmann-json3-dev libcurl4-openssl-dev libssl-dev libssh2-1-dev libfmt-dev libspdlog-dev catch2 libcereal-dev
  openssh-server openssh-client python3 python3-boto3 iproute2 procps ccache libzstd-dev zstd
  libtorch-dev libgloo-dev  # these two: examples/ddp_libtorch and its tests
  python3-venv  # an image's pip environment on Local and on test hosts
  slurm-wlm munge)  # a real Slurm cluster of test hosts (tests/hosts/slurm)
# Volumes: s3fs (the FUSE client nodes mount buckets with; test hosts use this machine's), and
# node + npm for tests/e2e/volumes' S3 server (s3rver, which scripts/test.sh installs from npm);
# Debian's npm only where no npm is installed (another node distribution may bring its own).
packages+=(s3fs)
# Firewalls: the host firewall of Verda's nodes (nftables, else iptables) run in test hosts'
# namespaces, and the fake DigitalOcean enforcing its cloud firewalls with nft.
packages+=(nftables iptables)
# The shell that runs on nodes (src/**/*.sh) and the tree's scripts are checked by shellcheck
# (tests/shellcheck).
packages+=(shellcheck)
command -v npm > /dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "sky: installing missing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
