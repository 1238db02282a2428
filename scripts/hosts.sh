#!/usr/bin/env bash
# Hosts of their own on this machine, joined by a network switch
# (docs/design.md#serving-groups-across-nodes, docs/design.md#sweeps-at-cluster-scale): each host is
# a process holding new PID, network and mount namespaces (its own /proc, /tmp, /dev/shm, /srv,
# loopback). The head host (198.18.0.1) holds a bridge, the switch; every other host (worker at
# 198.18.0.2, worker2 at 198.18.0.3, …, from the benchmarking range 198.18.0.0/15) is joined to it
# by a veth pair, its cable. The addresses exist only inside the hosts; nothing is created in any
# other namespace. Only the head host has the checkout: the others see the Ray installation
# (HYPERLOOM_RAY's, else the checkout's .venv) and none of the checkout (the checkout directory, and
# a checkout that holds the venv, is hidden under an empty tmpfs, the venv bound back). Every host
# has the stand-in engine and client (examples/fake-engine.mjs, engine-model.mjs, client-formats.mjs,
# fake-bench-client.mjs) installed outside any checkout, as a user installs an engine, at
# /srv/hyperloom-stand-ins (the same path on every node, so one server command runs on any), with
# the commands `fake-engine` and `fake-bench-client` in its bin/ (for PATH). By default every host
# also sees one folder at /tmp/shared (DIR/shared), as nodes see a shared file system; `--no-shared`
# makes hosts that share nothing but the network (and Ray).
#
# Usage:
#   scripts/hosts.sh up DIR [--hosts N] [--no-shared]
#                                         make N hosts (default 2: head, worker; 3 adds worker2);
#                                         DIR keeps their pids (exit 3 and one line on stderr when
#                                         namespaces cannot be made here)
#   scripts/hosts.sh run DIR HOST CMD...  run CMD on HOST (head|worker|worker2|workerN), in the
#                                         current directory on the head, in / on the others
#   scripts/hosts.sh cut DIR [HOST] | heal DIR [HOST]
#                                         take HOST's cable (default: worker's) down / up
#   scripts/hosts.sh down DIR             end every host (every process in them is killed)
#   scripts/hosts.sh check                exit 0 when hosts can be made here
# Needs root (or the capability to create namespaces), unshare(1), nsenter(1) and ip(8).
set -euo pipefail

NET=198.18.0
STAND_INS=/srv/hyperloom-stand-ins
HERE=$(cd "$(dirname "$0")/.." && pwd)

# The init of a host: pid 1 of its PID namespace. Sets the host up, says so on fd 9, then stays,
# reaping the orphans Ray leaves behind, until it is killed (which ends everything in the host).
HOST_INIT='
set -e
role=$1 here=$2 keep=$3 shared=$4 stand_ins=$5; shift 5
ip link set lo up
# The stand-in engine and client, installed as a user installs an engine: outside the checkout.
mount -t tmpfs -o size=16m,mode=755 tmpfs /srv
mkdir -p "$stand_ins/bin"
cp "$here/examples/fake-engine.mjs" "$here/examples/engine-model.mjs" \
  "$here/examples/fake-bench-client.mjs" "$here/examples/client-formats.mjs" "$stand_ins/"
for cmd in fake-engine fake-bench-client; do  # commands on PATH, as `vllm` is
  printf "#!/bin/sh\nexec node %s/%s.mjs \"\$@\"\n" "$stand_ins" "$cmd" > "$stand_ins/bin/$cmd"
  chmod 755 "$stand_ins/bin/$cmd"
done
mount -t tmpfs -o size=2g tmpfs /dev/shm
mkdir /dev/shm/.host-tmp /dev/shm/.keep /dev/shm/.shared
mount --rbind /tmp /dev/shm/.host-tmp
[ -n "$shared" ] && mount --bind "$shared" /dev/shm/.shared
mount -t tmpfs -o size=2g tmpfs /tmp
if [ -n "$shared" ]; then
  mkdir /tmp/shared
  mount --bind /dev/shm/.shared /tmp/shared
  umount -l /dev/shm/.shared
fi
if [ "$role" = head ]; then
  # The head host runs hyperloom from the checkout, also one under /tmp (a clone in /tmp/x).
  case "$here" in
    /tmp/*) mkdir -p "$here"; mount --rbind "/dev/shm/.host-tmp${here#/tmp}" "$here" ;;
  esac
else
  # Any other host: the Ray installation stays, every checkout goes.
  # A venv under /tmp (a clone in /tmp/x) is reached through the old /tmp kept aside above.
  case "$keep" in
    "") ;;
    /tmp/*) mount --rbind "/dev/shm/.host-tmp${keep#/tmp}" /dev/shm/.keep ;;
    *) mount --rbind "$keep" /dev/shm/.keep ;;
  esac
  for hide in "$@"; do
    case "$hide" in
      /tmp/*) ;;  # the new /tmp already hides it
      *) mount -t tmpfs -o size=1m,mode=755 tmpfs "$hide" ;;
    esac
  done
  if [ -n "$keep" ]; then
    mkdir -p "$keep" 2>/dev/null || true
    mount --rbind /dev/shm/.keep "$keep"
    umount -l /dev/shm/.keep
  fi
fi
umount -l /dev/shm/.host-tmp
rmdir /dev/shm/.host-tmp /dev/shm/.keep /dev/shm/.shared 2>/dev/null || true
unset TMPDIR RAY_TMPDIR
echo ready >&9
exec 9>&-
trap "" TERM INT HUP
while :; do sleep 3600 & wait $! || true; done
'

die() { echo "hosts: $*" >&2; exit 3; }

# The hosts DIR holds, head first: head worker worker2 …
roles() { cat "$1/roles"; }
ip_of() {  # ROLE
  case "$1" in
    head) echo "$NET.1" ;;
    worker) echo "$NET.2" ;;
    worker*) echo "$NET.$(( ${1#worker} + 1 ))" ;;
  esac
}
port_of() {  # ROLE: the switch's port for that host's cable, in the head host
  echo "hl-port-${1}"
}

# The directory of the Ray installation the worker keeps, and the checkouts it hides.
ray_dirs() {
  local ray=${HYPERLOOM_RAY:-$HERE/.venv/bin/ray} venv top d
  venv=$(cd "$(dirname "$(readlink -f "$ray")")/.." && pwd -P)
  echo "$venv"
  echo "$(cd "$HERE" && pwd -P)"
  # A venv inside another checkout (a git work tree): hide that one too.
  d=$venv
  while [ "$d" != / ]; do
    d=$(dirname "$d")
    if [ -e "$d/.git" ]; then echo "$d"; break; fi
  done
}

init_pid() {  # the pid (as seen here) of a host's init: the one child of its unshare
  local u
  u=$(cat "$1/$2.unshare")
  cat "/proc/$u/task/$u/children" 2>/dev/null | awk "{print \$1}"
}

start_host() {  # DIR ROLE SHARED KEEP HIDE...
  local dir=$1 role=$2 shared=$3 keep=$4; shift 4
  : > "$dir/$role.ready"
  # setsid: the host is not in the caller's process group (a test runner's Ctrl-C is its own).
  setsid unshare --pid --fork --net --mount --mount-proc --propagation private \
    bash -c "$HOST_INIT" "host-$role" "$role" "$HERE" "$keep" "$shared" "$STAND_INS" "$@" \
    9>"$dir/$role.ready" </dev/null >"$dir/$role.log" 2>&1 &
  echo $! > "$dir/$role.unshare"
}

wait_ready() {
  local dir=$1 role=$2 i
  for i in $(seq 1 100); do
    if grep -q ready "$dir/$role.ready" 2>/dev/null; then
      init_pid "$dir" "$role" > "$dir/$role.pid"
      [ -s "$dir/$role.pid" ] && return 0
    fi
    if ! kill -0 "$(cat "$dir/$role.unshare")" 2>/dev/null; then
      die "cannot make the $role host's namespaces: $(tr '\n' ' ' < "$dir/$role.log")"
    fi
    sleep 0.05
  done
  die "the $role host did not come up: $(tr '\n' ' ' < "$dir/$role.log")"
}

on() {  # DIR ROLE CMD...: CMD in that host's namespaces
  local dir=$1 role=$2; shift 2
  local pid
  pid=$(cat "$dir/$role.pid")
  if [ "$role" = head ]; then
    exec nsenter --target "$pid" --pid --net --mount --wd="$(pwd)" -- "$@"
  fi
  exec nsenter --target "$pid" --pid --net --mount --wd=/ -- "$@"
}

cmd=${1:-}
case "$cmd" in
  check)
    exec unshare --pid --fork --net --mount --mount-proc true ;;
  up)
    dir=${2:?usage: hosts.sh up DIR [--hosts N] [--no-shared]}
    shift 2
    count=2 shared=yes
    while [ $# -gt 0 ]; do
      case "$1" in
        --hosts) count=${2:?--hosts N}; shift 2 ;;
        --no-shared) shared=""; shift ;;
        *) die "unknown option $1" ;;
      esac
    done
    [ "$count" -ge 2 ] && [ "$count" -le 9 ] || die "--hosts takes 2 to 9"
    mkdir -p "$dir"
    shared_dir=""
    if [ -n "$shared" ]; then shared_dir="$dir/shared"; mkdir -p "$shared_dir"; fi
    for tool in unshare nsenter ip; do
      command -v "$tool" >/dev/null || die "cannot make namespaces here: no $tool"
    done
    unshare --pid --fork --net --mount --mount-proc true 2>"$dir/check.log" ||
      die "cannot make namespaces here: $(tr '\n' ' ' < "$dir/check.log")"
    mapfile -t dirs < <(ray_dirs)
    all=(head worker)
    for i in $(seq 2 $((count - 1))); do all+=("worker$i"); done
    printf '%s\n' "${all[@]}" > "$dir/roles"
    start_host "$dir" head "$shared_dir" ""
    for role in "${all[@]:1}"; do start_host "$dir" "$role" "$shared_dir" "${dirs[0]}" "${dirs[@]:1}"; done
    for role in "${all[@]}"; do wait_ready "$dir" "$role"; done
    head=$(cat "$dir/head.pid")
    # The switch: a bridge inside the head host, holding the head's address.
    nsenter --target "$head" --net ip link add hl-switch type bridge
    nsenter --target "$head" --net ip addr add "$(ip_of head)/24" dev hl-switch
    nsenter --target "$head" --net ip link set hl-switch up
    # A default route: Ray finds a node's address by routing toward an outside address; it never
    # leaves the hosts (nothing answers beyond the switch).
    nsenter --target "$head" --net ip route add default dev hl-switch
    for role in "${all[@]:1}"; do
      # Each cable: one end a port of the switch in the head host, the other inside its host.
      pid=$(cat "$dir/$role.pid") port=$(port_of "$role")
      nsenter --target "$head" --net ip link add "$port" type veth peer name hl-cable netns "$pid"
      nsenter --target "$head" --net ip link set "$port" master hl-switch
      nsenter --target "$head" --net ip link set "$port" up
      nsenter --target "$pid" --net ip addr add "$(ip_of "$role")/24" dev hl-cable
      nsenter --target "$pid" --net ip link set hl-cable up
      nsenter --target "$pid" --net ip route add default dev hl-cable
    done
    ;;
  run)
    dir=${2:?usage: hosts.sh run DIR HOST CMD...} role=${3:?usage: hosts.sh run DIR HOST CMD...}
    shift 3
    on "$dir" "$role" "$@" ;;
  cut | heal)
    dir=${2:?usage: hosts.sh $cmd DIR [HOST]} role=${3:-worker}
    [ "$role" != head ] || die "the head host holds the switch: cut another host"
    grep -qx "$role" "$dir/roles" || die "no host $role"
    state=$([ "$cmd" = cut ] && echo down || echo up)
    nsenter --target "$(cat "$dir/head.pid")" --net ip link set "$(port_of "$role")" "$state"
    nsenter --target "$(cat "$dir/$role.pid")" --net ip link set hl-cable "$state"
    ;;
  down)
    dir=${2:?usage: hosts.sh down DIR}
    for role in $(roles "$dir" 2>/dev/null || echo head worker); do
      pid=$(cat "$dir/$role.pid" 2>/dev/null || true)
      [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
      u=$(cat "$dir/$role.unshare" 2>/dev/null || true)
      [ -n "$u" ] && kill -KILL "$u" 2>/dev/null || true
    done
    ;;
  *)
    sed -n '2,27p' "$0" >&2
    exit 2 ;;
esac
