#!/usr/bin/env bash
# Runs a command as if on a host of its own: new PID, network and mount namespaces, a private /tmp
# and /dev/shm, loopback only. A `ray stop --force` inside kills only the Ray processes started
# inside, a head inside is invisible to every process outside (and theirs to it), and everything
# left inside is killed when the command ends (the namespace's init exits).
#
# npm test (scripts/test.mjs) runs each real-Ray test file this way, so that two files can run at
# once without one's `ray stop --force` reaching the other's head. Needs root (or the capability
# to create these namespaces), unshare(1) and ip(8); `own-host.sh true` exits 0 when it can.
#
# Usage: scripts/own-host.sh CMD [ARG...]   (runs in the current directory, also one under /tmp,
# the only part of the host's /tmp it sees)
set -euo pipefail
exec unshare --pid --fork --net --mount --mount-proc --propagation private bash -c '
  set -e
  ip link set lo up
  here=$(pwd)
  mount -t tmpfs -o size=4g tmpfs /dev/shm
  # A working directory under /tmp (a clone in /tmp/x) stays where it was: the host'"'"'s /tmp is
  # kept reachable under the new /dev/shm while the new /tmp is mounted, the directory is bound
  # back to its path inside it, and the old /tmp let go again.
  mkdir /dev/shm/.host-tmp
  mount --bind /tmp /dev/shm/.host-tmp
  mount -t tmpfs -o size=4g tmpfs /tmp
  case "$here" in
    /tmp/*) mkdir -p "$here"; mount --bind "/dev/shm/.host-tmp${here#/tmp}" "$here" ;;
  esac
  umount /dev/shm/.host-tmp
  rmdir /dev/shm/.host-tmp
  cd "$here"
  # Its own /tmp is its temp dir: an inherited TMPDIR/RAY_TMPDIR would point at a directory the
  # host (and every other host of its own) shares, where Ray keeps its current-cluster file.
  unset TMPDIR RAY_TMPDIR
  set +e
  # Not exec: bash stays the namespace'"'"'s init and reaps the orphans Ray leaves behind.
  "$@"; rc=$?; exit "$rc"
' own-host "$@"
