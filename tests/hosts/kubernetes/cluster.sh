#!/usr/bin/env bash
# A real Kubernetes cluster for the tests, on this machine, touching nothing of the host's:
#
#   cluster.sh up DIR [NODES]   bring up a cluster whose every file lies in DIR (made here)
#   cluster.sh down DIR         stop it: processes, mounts, bridge, cgroups, then DIR
#   cluster.sh api DIR METHOD PATH [JSON]   the API as the admin (curl; prints the answer)
#   cluster.sh logs DIR         the last lines of every daemon's log
#
# etcd, kube-apiserver (loopback only), kube-controller-manager and kube-scheduler run in this
# network namespace; each node (1 or 2) is containerd + runc + CNI and a kubelet in a private
# mount namespace whose /run, /var/lib and /var/log are DIR's (the host sees none of their files
# and mounts). The nodes' addresses are on a bridge of the cluster's own (CNI bridge with no
# gateway, no NAT, no forwarding: nothing leaves the machine); no sysctl is changed (the kubelet
# is patched to warn instead, build.sh). Every process runs in a cgroup of the cluster's own in
# each cgroup v1 hierarchy, so `down` finds them all (container shims and pods included).
#
# `up` writes DIR/env (the addresses and files, KEY=value lines), DIR/admin.kubeconfig (a
# system:masters user) and DIR/user.kubeconfig (a user with only the Role `sky-user` in the
# namespace `sky-test`: pods and their exec, portforward, log and status, events, configmaps).
# One cluster at a time per machine: the caller holds the lock (the fixture does), since the
# bridge's subnet is fixed (10.231.0.0/16, beside tests/hosts' 10.200.0.0/12).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { echo "sky: kubernetes cluster: $*" >&2; }
die() {
  log "$*"
  exit 1
}

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then die "usage: cluster.sh up|down DIR [NODES]"; fi
case $dir in /*) ;; *) die "DIR must be an absolute path, not $dir" ;; esac
tag=$(basename "$dir" | tr -c 'a-z0-9\n' 'x' | tail -c 9)
bridge=skykb$tag
bridge=${bridge:0:15}
cgroup=sky-kube-$tag
subnet_prefix=10.231

hierarchies() { awk '$3 == "cgroup" {print $2}' /proc/mounts; }

# Runs "$@" in the background in cgroup $1 (made in every hierarchy), output to DIR/log/$2.log;
# prints its pid.
spawn() {
  local cg=$1 name=$2
  shift 2
  (
    for h in $(hierarchies); do echo "$BASHPID" > "$h/$cgroup/$cg/cgroup.procs"; done
    exec setsid "$@" > "$dir/log/$name.log" 2>&1 < /dev/null
  ) &
  echo "$!" > "$dir/pids/$name"
}

make_cgroup() { # path under the cluster's cgroup
  local h path
  for h in $(hierarchies); do
    path=$h/$cgroup
    mkdir -p "$path/$1"
    # A cpuset child can take tasks only once it has cpus and mems (copied from its parent).
    if [ -e "$h/cpuset.cpus" ]; then
      local p=$h part
      for part in $cgroup ${1//\// }; do
        [ -s "$p/$part/cpuset.cpus" ] || cat "$p/cpuset.cpus" > "$p/$part/cpuset.cpus"
        [ -s "$p/$part/cpuset.mems" ] || cat "$p/cpuset.mems" > "$p/$part/cpuset.mems"
        p=$p/$part
      done
    fi
  done
}

wait_for() { # seconds description command...
  local limit=$1 what=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@" > /dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || die "$what did not come up within $limit s (logs in $dir/log)"
    sleep 0.2
  done
}

# The API as the admin: api METHOD PATH [JSON BODY]; prints the answer, fails on an HTTP error.
api() {
  local method=$1 path=$2 body=${3:-}
  local args=(-sS --fail-with-body --max-time 20 -X "$method" --cacert "$dir/pki/ca.crt"
    --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key")
  [ -z "$body" ] || args+=(-H "Content-Type: application/json" --data-binary "$body")
  curl "${args[@]}" "$(api_server)$path"
}
api_server() {
  if [ -z "${api_port:-}" ]; then api_port=$(sed -n 's|^SKY_KUBE_SERVER=https://127.0.0.1:||p' "$dir/env"); fi
  echo "https://127.0.0.1:$api_port"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# --- PKI ----------------------------------------------------------------------------------
cert() { # name subject [extensions]: a key and a certificate signed by the cluster's CA
  local name=$1 subject=$2 ext=${3:-}
  openssl ecparam -name prime256v1 -genkey -noout -out "$dir/pki/$name.key" 2> /dev/null
  openssl req -new -key "$dir/pki/$name.key" -subj "$subject" -out "$dir/pki/$name.csr" 2> /dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    [ -n "$ext" ] && echo "$ext"
  } > "$dir/pki/$name.ext"
  openssl x509 -req -in "$dir/pki/$name.csr" -CA "$dir/pki/ca.crt" -CAkey "$dir/pki/ca.key" \
    -CAcreateserial -days 2 -sha256 -extfile "$dir/pki/$name.ext" -out "$dir/pki/$name.crt" 2> /dev/null
  rm -f "$dir/pki/$name.csr" "$dir/pki/$name.ext"
}

kubeconfig() { # file user cert-name server
  local file=$1 user=$2 name=$3 server=$4
  cat > "$file" << EOF
apiVersion: v1
kind: Config
clusters:
- name: sky-test
  cluster:
    server: $server
    certificate-authority: $dir/pki/ca.crt
users:
- name: $user
  user:
    client-certificate: $dir/pki/$name.crt
    client-key: $dir/pki/$name.key
contexts:
- name: sky-test
  context:
    cluster: sky-test
    user: $user
current-context: sky-test
EOF
  chmod 600 "$file"
}

make_pki() {
  mkdir -p "$dir/pki"
  chmod 700 "$dir/pki"
  openssl ecparam -name prime256v1 -genkey -noout -out "$dir/pki/ca.key" 2> /dev/null
  openssl req -x509 -new -key "$dir/pki/ca.key" -subj "/CN=sky-test-ca" -days 2 -sha256 \
    -out "$dir/pki/ca.crt" 2> /dev/null
  cert apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:$subnet_prefix.255.1"
  cert apiserver-kubelet "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
  cert admin "/O=system:masters/CN=sky-admin" "extendedKeyUsage=clientAuth"
  cert user "/CN=sky-user" "extendedKeyUsage=clientAuth"
  cert controller-manager "/CN=system:kube-controller-manager" "extendedKeyUsage=clientAuth"
  cert scheduler "/CN=system:kube-scheduler" "extendedKeyUsage=clientAuth"
  local i
  for ((i = 0; i < nodes; i++)); do
    cert "node$i" "/O=system:nodes/CN=system:node:node$i" "extendedKeyUsage=clientAuth"
    cert "node$i-serving" "/CN=node$i" "extendedKeyUsage=serverAuth
subjectAltName=IP:$(node_ip "$i"),DNS:node$i"
  done
  openssl genrsa -out "$dir/pki/sa.key" 2048 2> /dev/null
  openssl rsa -in "$dir/pki/sa.key" -pubout -out "$dir/pki/sa.pub" 2> /dev/null
}

node_ip() { echo "$subnet_prefix.0.$((10 + $1))"; }

# --- a node: containerd and the kubelet in a private mount namespace ----------------------
node_config() { # i
  local i=$1 n=$dir/node$1
  mkdir -p "$n/run" "$n/var-lib" "$n/var-log" "$n/cni" "$n/etc"
  cat > "$n/containerd.toml" << EOF
version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$n/containerd.sock"
[ttrpc]
  address = "$n/containerd.sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "sky.test/pause:latest"
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$n/cni"
EOF
  cat > "$n/cni/10-sky.conflist" << EOF
{
  "cniVersion": "0.4.0",
  "name": "sky-test",
  "plugins": [
    {"type": "bridge", "bridge": "$bridge", "isGateway": false, "ipMasq": false,
     "hairpinMode": false, "ipam": {"type": "host-local", "ranges": [[{
       "subnet": "$subnet_prefix.0.0/16",
       "rangeStart": "$subnet_prefix.$((i + 1)).2", "rangeEnd": "$subnet_prefix.$((i + 1)).250"}]],
       "dataDir": "/var/lib/cni/networks"}},
    {"type": "loopback"}
  ]
}
EOF
  kubeconfig "$n/kubelet.kubeconfig" "system:node:node$i" "node$i" "https://127.0.0.1:$api_port"
  cat > "$n/kubelet.yaml" << EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $(node_ip "$i")
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: AlwaysAllow}
tlsCertFile: $dir/pki/node$i-serving.crt
tlsPrivateKeyFile: $dir/pki/node$i-serving.key
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup/node$i/pods
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
makeIPTablesUtilChains: false
protectKernelDefaults: false
syncFrequency: 5s
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
serializeImagePulls: false
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
maxPods: 50
EOF
}

# Inside the node's mount namespace (unshare'd by `node_start`): the scratch /run, /var/lib and
# /var/log, the cgroup2 hierarchy hidden (the kubelet 1.20 mixes it up with v1), then containerd,
# the images, the kubelet. Runs as the namespace's holder until killed.
node_inner() {
  local i=$1 n=$dir/node$1
  mount --make-rprivate /
  mount --bind "$n/run" /run
  mount --bind "$n/var-lib" /var/lib
  mount --bind "$n/var-log" /var/log
  if mountpoint -q /sys/fs/cgroup/unified; then umount -l /sys/fs/cgroup/unified; fi
  containerd --config "$n/containerd.toml" > "$dir/log/containerd$i.log" 2>&1 &
  echo "$!" > "$dir/pids/containerd$i"
  wait_for 30 "containerd of node$i" ctr --address "$n/containerd.sock" version
  local image
  for image in pause base; do
    ctr --address "$n/containerd.sock" -n k8s.io images import "$cache/images/$image.tar" \
      > "$dir/log/import-$image-$i.log" 2>&1 || die "importing the $image image into node$i failed"
  done
  "$cache/bin/kubelet" --config "$n/kubelet.yaml" --kubeconfig "$n/kubelet.kubeconfig" \
    --container-runtime=remote --container-runtime-endpoint="unix://$n/containerd.sock" \
    --hostname-override="node$i" --node-ip="$(node_ip "$i")" --cert-dir="$n/kubelet-pki" \
    --root-dir=/var/lib/kubelet --v=1 > "$dir/log/kubelet$i.log" 2>&1 &
  echo "$!" > "$dir/pids/kubelet$i"
  wait
}

node_start() {
  local i=$1
  make_cgroup "node$i/pods"
  spawn "node$i" "node$i" unshare --mount --propagation private "$here/cluster.sh" node-inner "$dir" "$i"
}

on_failed_up() {
  local status=$?
  [ "$status" -ne 0 ] || return 0
  log "bring-up failed; the logs' last lines:"
  tail -n 8 "$dir"/log/*.log >&2 || true
  down
}

up() {
  nodes=${1:-1}
  [[ $nodes =~ ^[12]$ ]] || die "NODES must be 1 or 2, not $nodes"
  [ "$(id -u)" -eq 0 ] || die "needs root (mount namespaces, a bridge, cgroups)"
  [ ! -e "$dir" ] || die "$dir exists already"
  cache=$("$here/build.sh")
  mkdir -p "$dir/log" "$dir/pids" "$dir/etcd"
  chmod 700 "$dir"
  # Whose cluster it is: the next fixture tears down a cluster whose owner died.
  echo "${SKY_KUBE_OWNER:-$PPID}" > "$dir/owner"
  trap on_failed_up EXIT
  local start=$SECONDS
  make_pki
  # The bridge the nodes' addresses and their pods' interfaces are on: no gateway, no NAT, no
  # forwarding, so it reaches nothing beyond this machine.
  ip link add "$bridge" type bridge
  ip link set "$bridge" up
  local i
  for ((i = 0; i < nodes; i++)); do ip addr add "$(node_ip "$i")/16" dev "$bridge"; done
  make_cgroup control

  etcd_port=$(free_port)
  etcd_peer=$(free_port)
  api_port=$(free_port)
  spawn control etcd etcd --name sky --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "sky=http://127.0.0.1:$etcd_peer" --log-outputs stderr
  spawn control kube-apiserver "$cache/bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" --bind-address 127.0.0.1 --secure-port "$api_port" \
    --advertise-address 127.0.0.1 --insecure-port 0 --endpoint-reconciler-type none \
    --tls-cert-file "$dir/pki/apiserver.crt" --tls-private-key-file "$dir/pki/apiserver.key" \
    --client-ca-file "$dir/pki/ca.crt" --authorization-mode Node,RBAC \
    --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --api-audiences https://kubernetes.default.svc \
    --kubelet-client-certificate "$dir/pki/apiserver-kubelet.crt" --kubelet-client-key "$dir/pki/apiserver-kubelet.key" \
    --kubelet-certificate-authority "$dir/pki/ca.crt" --kubelet-preferred-address-types InternalIP \
    --service-cluster-ip-range "$subnet_prefix.255.0/24" --allow-privileged=true \
    --profiling=false --v=1
  kubeconfig "$dir/admin.kubeconfig" sky-admin admin "https://127.0.0.1:$api_port"
  kubeconfig "$dir/user.kubeconfig" sky-user user "https://127.0.0.1:$api_port"
  sed -i 's/^  context:$/  context:\n    namespace: sky-test/' "$dir/user.kubeconfig"
  kubeconfig "$dir/controller-manager.kubeconfig" system:kube-controller-manager controller-manager \
    "https://127.0.0.1:$api_port"
  kubeconfig "$dir/scheduler.kubeconfig" system:kube-scheduler scheduler "https://127.0.0.1:$api_port"
  wait_for 60 "kube-apiserver" api GET /readyz
  spawn control kube-controller-manager "$cache/bin/kube-controller-manager" \
    --kubeconfig "$dir/controller-manager.kubeconfig" --leader-elect=false --port 0 --secure-port 0 \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --use-service-account-credentials=true --controllers '*,-nodeipam,-service,-route,-csrsigning' --v=1
  spawn control kube-scheduler "$cache/bin/kube-scheduler" \
    --kubeconfig "$dir/scheduler.kubeconfig" --leader-elect=false --port 0 --secure-port 0 --v=1
  for ((i = 0; i < nodes; i++)); do
    node_config "$i"
    node_start "$i"
  done
  {
    echo "SKY_KUBE_SERVER=https://127.0.0.1:$api_port"
    echo "SKY_KUBE_CA=$dir/pki/ca.crt"
    echo "SKY_KUBE_ADMIN=$dir/admin.kubeconfig"
    echo "SKY_KUBE_USER=$dir/user.kubeconfig"
    echo "SKY_KUBE_NAMESPACE=sky-test"
    echo "SKY_KUBE_NODES=$nodes"
    echo "SKY_KUBE_BASE_IMAGE=sky.test/base:latest"
    echo "SKY_KUBE_PAUSE_IMAGE=sky.test/pause:latest"
    echo "SKY_KUBE_BRIDGE=$bridge"
    echo "SKY_KUBE_CGROUP=$cgroup"
  } > "$dir/env"
  api POST /api/v1/namespaces '{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sky-test"}}' > /dev/null
  api POST /apis/rbac.authorization.k8s.io/v1/namespaces/sky-test/roles '{
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
    "metadata": {"name": "sky-user", "namespace": "sky-test"},
    "rules": [
      {"apiGroups": [""], "resources": ["pods", "pods/status", "pods/log"],
       "verbs": ["get", "list", "watch", "create", "delete", "deletecollection", "patch"]},
      {"apiGroups": [""], "resources": ["pods/exec", "pods/portforward"], "verbs": ["get", "create"]},
      {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list", "watch"]},
      {"apiGroups": [""], "resources": ["configmaps"],
       "verbs": ["get", "list", "watch", "create", "delete", "patch"]}]}' > /dev/null
  api POST /apis/rbac.authorization.k8s.io/v1/namespaces/sky-test/rolebindings '{
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
    "metadata": {"name": "sky-user", "namespace": "sky-test"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sky-user"},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "sky-user"}]}' > /dev/null
  node_ready() {
    [ "$(api GET /api/v1/nodes | python3 -c '
import json, sys
nodes = json.load(sys.stdin)["items"]
print(sum(1 for n in nodes for c in n["status"].get("conditions", [])
          if c["type"] == "Ready" and c["status"] == "True"))')" -eq "$nodes" ]
  }
  wait_for 90 "$nodes Ready node(s)" node_ready
  # The default service account, which pods need (the token controller makes its secret).
  wait_for 30 "the default service account of sky-test" api GET /api/v1/namespaces/sky-test/serviceaccounts/default
  log "up in $((SECONDS - start)) s ($nodes node(s), API at https://127.0.0.1:$api_port)"
}

# Every process of the cluster is in its cgroups: kill them until none is left, then remove the
# cgroups (deepest first), the bridge (the pods' interfaces went with their namespaces) and DIR.
down() {
  [ -d "$dir" ] || return 0
  local h deadline=$((SECONDS + 20)) left
  while :; do
    left=0
    for h in $(hierarchies); do
      [ -d "$h/$cgroup" ] || continue
      while read -r pid; do
        kill -9 "$pid" 2> /dev/null || true
        left=1
      done < <(find "$h/$cgroup" -name cgroup.procs -exec cat {} + 2> /dev/null)
    done
    [ "$left" -eq 1 ] || break
    [ $SECONDS -lt $deadline ] || {
      log "processes still alive in /$cgroup after 20 s"
      break
    }
    sleep 0.2
  done
  for h in $(hierarchies); do
    [ -d "$h/$cgroup" ] || continue
    find "$h/$cgroup" -depth -type d -exec rmdir {} \; 2> /dev/null || true
    [ ! -d "$h/$cgroup" ] || log "could not remove $h/$cgroup"
  done
  if ip link show "$bridge" > /dev/null 2>&1; then ip link del "$bridge"; fi
  rm -rf "$dir"
}

case $cmd in
  up) up "${3:-1}" ;;
  down) down ;;
  api) api "${@:3}" ;;
  logs) tail -n 15 "$dir"/log/*.log ;;
  node-inner)
    cache=$("$here/build.sh" --dir)
    node_inner "$3"
    ;;
  *) die "unknown command $cmd (up, down)" ;;
esac
