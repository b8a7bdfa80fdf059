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
# Kubernetes: yaml-cpp reads kubeconfigs (src/providers/kubernetes); the test cluster
# (tests/hosts/kubernetes) builds kube-apiserver, kube-controller-manager, kube-scheduler and the
# kubelet from Debian's `kubernetes` source (golang-go, dpkg-dev, the packaged reflect2 1.0.2), runs
# etcd, containerd, runc and the CNI plugins, and assembles its images with umoci, skopeo and
# mmdebstrap (busybox-static: the pods' nc; curl: its API calls). Their services are kept from
# starting below.
packages+=(libyaml-cpp-dev golang-go dpkg-dev golang-github-modern-go-reflect2-dev etcd-server
  etcd-client containerd runc containernetworking-plugins umoci skopeo mmdebstrap busybox-static
  rsync openssl curl)
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
  # No service of these packages may start (etcd, containerd: the tests start their own): a
  # policy-rc.d that denies every start, for the install only, unless one is there already.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" > /dev/null
    "${sudo_cmd[@]}" chmod 755 "$policy"
    trap '"${sudo_cmd[@]}" rm -f "$policy"' EXIT
  fi
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
