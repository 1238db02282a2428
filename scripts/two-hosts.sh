#!/usr/bin/env bash
# Two hosts of their own on this machine, joined by a network cable (SPEC §11): each host is a
# process holding new PID, network and mount namespaces (its own /proc, /tmp, /dev/shm, loopback),
# and a veth pair joins the two network namespaces. The addresses (198.18.0.1 on the head host,
# 198.18.0.2 on the worker host, from the benchmarking range 198.18.0.0/15) exist only inside
# them; nothing is created in any other namespace. The worker host sees the Ray installation
# (HYPERLOOM_RAY's, else the checkout's .venv) and none of the checkout: the checkout directory
# (and a checkout that holds the venv) is hidden under an empty tmpfs, the venv bound back. Both
# hosts see one folder at /tmp/shared (DIR/shared), as nodes see a shared file system.
#
# Usage:
#   scripts/two-hosts.sh up DIR           make both hosts; DIR keeps their pids (exit 3 and one
#                                         line on stderr when namespaces cannot be made here)
#   scripts/two-hosts.sh run DIR HOST CMD...   run CMD on HOST (head|worker), in the current
#                                         directory on the head, in / on the worker
#   scripts/two-hosts.sh cut DIR | heal DIR    take the cable down / up (a network partition)
#   scripts/two-hosts.sh down DIR         end both hosts (every process in them is killed)
#   scripts/two-hosts.sh check            exit 0 when two hosts can be made here
# Needs root (or the capability to create namespaces), unshare(1), nsenter(1) and ip(8).
set -euo pipefail

HEAD_IP=198.18.0.1
WORKER_IP=198.18.0.2
HERE=$(cd "$(dirname "$0")/.." && pwd)

# The init of a host: pid 1 of its PID namespace. Sets the host up, says so on fd 9, then stays,
# reaping the orphans Ray leaves behind, until it is killed (which ends everything in the host).
HOST_INIT='
set -e
role=$1 here=$2 keep=$3 shared=$4; shift 4
ip link set lo up
mount -t tmpfs -o size=2g tmpfs /dev/shm
mkdir /dev/shm/.host-tmp /dev/shm/.keep /dev/shm/.shared
mount --rbind /tmp /dev/shm/.host-tmp
mount --bind "$shared" /dev/shm/.shared
mount -t tmpfs -o size=2g tmpfs /tmp
mkdir /tmp/shared
mount --bind /dev/shm/.shared /tmp/shared
umount -l /dev/shm/.shared
if [ "$role" = head ]; then
  # The head host runs hyperloom from the checkout, also one under /tmp (a clone in /tmp/x).
  case "$here" in
    /tmp/*) mkdir -p "$here"; mount --rbind "/dev/shm/.host-tmp${here#/tmp}" "$here" ;;
  esac
else
  # The worker host: the Ray installation stays, every checkout goes.
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

die() { echo "two hosts: $*" >&2; exit 3; }

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

start_host() {  # DIR ROLE KEEP HIDE...
  local dir=$1 role=$2 keep=$3; shift 3
  : > "$dir/$role.ready"
  # setsid: the host is not in the caller's process group (a test runner's Ctrl-C is its own).
  setsid unshare --pid --fork --net --mount --mount-proc --propagation private \
    bash -c "$HOST_INIT" "host-$role" "$role" "$(pwd)" "$keep" "$dir/shared" "$@" \
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
    dir=${2:?usage: two-hosts.sh up DIR}
    mkdir -p "$dir" "$dir/shared"
    for tool in unshare nsenter ip; do
      command -v "$tool" >/dev/null || die "cannot make namespaces here: no $tool"
    done
    unshare --pid --fork --net --mount --mount-proc true 2>"$dir/check.log" ||
      die "cannot make namespaces here: $(tr '\n' ' ' < "$dir/check.log")"
    mapfile -t dirs < <(ray_dirs)
    start_host "$dir" head ""
    start_host "$dir" worker "${dirs[0]}" "${dirs[@]:1}"
    wait_ready "$dir" head
    wait_ready "$dir" worker
    head=$(cat "$dir/head.pid") worker=$(cat "$dir/worker.pid")
    # The cable: created inside the head host with its other end inside the worker host.
    nsenter --target "$head" --net ip link add hl-cable type veth peer name hl-cable netns "$worker"
    for side in "$head $HEAD_IP" "$worker $WORKER_IP"; do
      set -- $side
      nsenter --target "$1" --net ip addr add "$2/24" dev hl-cable
      nsenter --target "$1" --net ip link set hl-cable up
      # A default route over the cable: Ray finds a node's address by routing toward an
      # outside address; it never leaves the two hosts (nothing answers beyond the cable).
      nsenter --target "$1" --net ip route add default dev hl-cable
    done
    ;;
  run)
    dir=${2:?usage: two-hosts.sh run DIR HOST CMD...} role=${3:?usage: two-hosts.sh run DIR HOST CMD...}
    shift 3
    on "$dir" "$role" "$@" ;;
  cut | heal)
    dir=${2:?usage: two-hosts.sh $cmd DIR}
    state=$([ "$cmd" = cut ] && echo down || echo up)
    for role in head worker; do
      nsenter --target "$(cat "$dir/$role.pid")" --net ip link set hl-cable "$state"
    done
    ;;
  down)
    dir=${2:?usage: two-hosts.sh down DIR}
    for role in head worker; do
      pid=$(cat "$dir/$role.pid" 2>/dev/null || true)
      [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
      u=$(cat "$dir/$role.unshare" 2>/dev/null || true)
      [ -n "$u" ] && kill -KILL "$u" 2>/dev/null || true
    done
    ;;
  *)
    sed -n '2,21p' "$0" >&2
    exit 2 ;;
esac
