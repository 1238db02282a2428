/**
 * Fake GPU device files for the clean-GPU tests (docs/design.md#clean-gpus), only on a host of one's own
 * (scripts/own-host.sh: private mount namespace): an overlay over /dev whose upper layer, in the
 * host's own /tmp, adds plain files /dev/nvidia0..N-1 and /dev/nvidiactl; the submounts of /dev
 * (/dev/shm, /dev/pts, …) are bound back on top. Opening /dev/nvidia1 then gives a descriptor
 * whose /proc/PID/fd link reads `/dev/nvidia1`, as a CUDA process's does. The real /dev (and every
 * other mount namespace) never sees the files; everything goes when the namespace ends.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"

/** Whether this process runs on a host of its own (own-host.sh is PID 1 of its PID namespace). */
export const onHostOfOwn = (): boolean => {
  try {
    return fs.readFileSync("/proc/1/cmdline", "utf8").split("\0").includes("own-host")
  } catch {
    return false
  }
}

/**
 * The shell script that adds /dev/nvidia0..count-1 in the mount namespace it runs in: run it only
 * in one of one's own (a host of its own, or a host of test/support/hosts.ts).
 */
export const fakeNvidiaScript = (count: number): string => `
set -eu
d=$(mktemp -d /tmp/hyperloom-fake-dev.XXXXXX)
mkdir -p "$d/upper" "$d/work" "$d/keep"
findmnt -rn -o TARGET | grep '^/dev/' | sort -u > "$d/list" || true
i=0
while read -r m; do i=$((i+1)); mkdir -p "$d/keep/$i"; mount --rbind "$m" "$d/keep/$i"; done < "$d/list"
mount -t overlay overlay -o "lowerdir=/dev,upperdir=$d/upper,workdir=$d/work" /dev
i=0
while read -r m; do i=$((i+1)); mount --rbind "$d/keep/$i" "$m"; done < "$d/list"
n=0
while [ "$n" -lt ${count} ]; do : > "/dev/nvidia$n"; chmod 666 "/dev/nvidia$n"; n=$((n+1)); done
: > /dev/nvidiactl
`

/** Adds /dev/nvidia0..count-1 (refuses outside a host of its own: it would shadow the real /dev). */
export const mountFakeNvidia = (count: number): void => {
  if (!onHostOfOwn()) throw new Error("fake GPU device files need a host of its own (scripts/own-host.sh)")
  execFileSync("sh", ["-c", fakeNvidiaScript(count)], { stdio: ["ignore", "ignore", "pipe"] })
}
