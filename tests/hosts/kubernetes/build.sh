#!/usr/bin/env bash
# Builds what the test cluster runs, once, into a cache outside the clone, and prints its
# directory: kube-apiserver, kube-controller-manager, kube-scheduler and kubelet from Debian's
# `kubernetes` source package with two fixes, and the pause and base images as docker archives.
#
#   build.sh            build when missing (under a lock), print the cache directory
#   build.sh --dir      print the directory the current key names, build nothing
#
# Fixes: the vendored github.com/modern-go/reflect2 1.0.1 crashes under Go >= 1.18 (SIGSEGV in
# mapiterinit on a node-status PATCH), so Debian's packaged 1.0.2 replaces it; the kubelet rewrites
# host sysctls unless protectKernelDefaults, which makes it exit instead, so a one-line patch
# selects its existing "warn" behaviour. The key names the Debian source version, the reflect2
# version, the patch, the Go version and `recipe` (raise it when a change here changes what is
# built): a change to any of them builds a new entry. Binaries and images are cached apart, so
# that an image recipe's failure keeps the binaries. The build tags `providerless` and
# `dockerless` leave out the legacy cloud providers and the kubelet's dockershim (about half of
# the build; the cluster needs neither). A failed or interrupted build keeps its unpacked tree
# and Go cache (root/work/<version>), from which the next one goes on.
# Nothing here changes the host: apt reads a private source list and private lists in the cache.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=${SKY_KUBERNETES_SOURCE_VERSION:-1.20.5+really1.20.2-1.1+deb12u1}
recipe=2
root=${XDG_CACHE_HOME:-$HOME/.cache}/sky/kubernetes
reflect2_dir=/usr/share/gocode/src/github.com/modern-go/reflect2

reflect2_version() { dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev 2>/dev/null || echo none; }
cache_key() {
  local digest
  digest=$({
    reflect2_version
    go version 2>/dev/null || echo no-go
    echo "recipe $recipe"
    cat "$here/kubelet-sysctl-warn.patch"
  } | sha256sum | cut -c1-12)
  echo "${version//[^A-Za-z0-9.+-]/_}-$digest"
}
dir=$root/$(cache_key)
if [ "${1:-}" = --dir ]; then
  echo "$dir"
  exit 0
fi
ready() { [ -e "$dir/bin/.ready" ] && [ -e "$dir/images/.ready" ]; }
if ready; then
  echo "$dir"
  exit 0
fi

mkdir -p "$root"
exec 9> "$root/.lock"
echo "sky: kubernetes test cluster: waiting for the build lock $root/.lock" >&2
flock 9
if ready; then
  echo "$dir"
  exit 0
fi
log() { echo "sky: kubernetes test cluster: $*" >&2; }
for tool in go gcc umoci skopeo mmdebstrap dpkg-source busybox; do
  command -v "$tool" > /dev/null || {
    log "missing $tool (scripts/install-deps.sh installs it)"
    exit 1
  }
done
[ -d "$reflect2_dir" ] || {
  log "missing $reflect2_dir (golang-github-modern-go-reflect2-dev)"
  exit 1
}
[ "$(id -u)" -eq 0 ] || {
  log "building the images needs root (umoci unpack keeps file owners)"
  exit 1
}

# The Debian archive apt already uses, as a deb-src entry in a private apt configuration.
mirror=$(apt-cache policy | awk '/ bookworm\/main / {print $2; exit}')
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
src=$root/src
apt_dir=$src/apt
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/parts"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror bookworm main" \
  > "$apt_dir/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o "Dir::Etc::SourceParts=$apt_dir/parts"
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o "APT::Sandbox::User=root")
dsc=$src/kubernetes_${version#*:}.dsc
if [ ! -e "$dsc" ]; then
  log "fetching the source of kubernetes $version from $mirror"
  apt-get "${apt_opts[@]}" update -qq
  (cd "$src" && apt-get "${apt_opts[@]}" source -qq --download-only "kubernetes=$version")
fi

work=$root/work/${version//[^A-Za-z0-9.+-]/_}
prepared=$(printf '%s\n' "$(reflect2_version)" "$(cat "$here/kubelet-sysctl-warn.patch")" | sha256sum | cut -c1-12)
mkdir -p "$dir"
if [ "$(cat "$work/prepared" 2> /dev/null)" != "$prepared" ]; then
  rm -rf "$work"
  mkdir -p "$work"
  log "unpacking into $work"
  dpkg-source -x "$dsc" "$work/k8s" > "$work/unpack.log" 2>&1 || {
    cat "$work/unpack.log" >&2
    exit 1
  }
  rm -rf "$work/k8s/vendor/github.com/modern-go/reflect2"
  cp -r "$reflect2_dir" "$work/k8s/vendor/github.com/modern-go/reflect2"
  (cd "$work/k8s" && patch -s -p1 < "$here/kubelet-sysctl-warn.patch")
  echo "$prepared" > "$work/prepared"
fi
rm -rf "${work:?}/bin" "${work:?}/images" "${work:?}"/oci-* "${work:?}"/bundle-*

if [ ! -e "$dir/bin/.ready" ]; then
  log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubelet (nice 19; 10+ minutes cold)"
  rm -rf "${dir:?}/bin"
  mkdir -p "$work/bin"
  for what in kube-apiserver kube-controller-manager kube-scheduler kubelet; do
    start=$SECONDS
    (cd "$work/k8s" && env GOFLAGS=-tags=providerless,dockerless GOPROXY=off CGO_ENABLED=0 \
      HOME="$work" nice -n 19 make WHAT="cmd/$what" > "$work/make-$what.log" 2>&1) || {
      tail -30 "$work/make-$what.log" >&2
      log "building $what failed (log above; the next run goes on from $work)"
      exit 1
    }
    cp "$work/k8s/_output/bin/$what" "$work/bin/"
    log "built $what in $((SECONDS - start)) s"
  done
  {
    echo "source=kubernetes $version"
    echo "reflect2=$(reflect2_version)"
    echo "go=$(go version)"
  } > "$work/bin/manifest"
  touch "$work/bin/.ready"
  mv "$work/bin" "$dir/bin"
fi

# Images, assembled with umoci (OCI layout) and exported by skopeo as docker archives, which
# `ctr images import` reads. The pause image is the tree's own pause.c, static.
image() { # name rootfs-populating-function umoci-config-arguments...
  local name=$1 fill=$2 layout=$work/oci-$1
  umoci init --layout "$layout"
  umoci new --image "$layout:latest"
  umoci unpack --image "$layout:latest" "$work/bundle-$name" > /dev/null
  "$fill" "$work/bundle-$name/rootfs"
  umoci repack --image "$layout:latest" "$work/bundle-$name"
  rm -rf "$work/bundle-$name"
  shift 2
  umoci config --image "$layout:latest" "$@"
  skopeo copy -q "oci:$layout:latest" "docker-archive:$work/images/$name.tar:sky.test/$name:latest"
}
fill_pause() {
  nice -n 19 gcc -Os -static -o "$1/pause" "$work/k8s/build/pause/linux/pause.c"
}
fill_base() {
  log "bootstrapping the base image from $mirror (mmdebstrap, minbase)"
  nice -n 19 mmdebstrap --quiet --variant=minbase bookworm "$1" "$mirror" >&2
  cp "$(command -v busybox)" "$1/usr/local/bin/busybox" # nc -ll for the tests' port-forward echo
  rm -rf "$1/var/cache/apt/archives"/*.deb "$1/var/lib/apt/lists"/*
}
if [ ! -e "$dir/images/.ready" ]; then
  rm -rf "${dir:?}/images"
  mkdir -p "$work/images"
  image pause fill_pause --config.entrypoint /pause
  image base fill_base --config.cmd /bin/bash --config.env PATH=/usr/local/bin:/usr/bin:/bin
  printf 'pause=sky.test/pause:latest\nbase=sky.test/base:latest\n' > "$work/images/names"
  touch "$work/images/.ready"
  mv "$work/images" "$dir/images"
fi
rm -rf "$work"
log "cached in $dir"
echo "$dir"
