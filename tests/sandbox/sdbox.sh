#!/bin/bash
# sdbox.sh: a real systemd for tests, booted without touching the machine.
#
#   sdbox.sh start DIR [SHARE]   boot; prints "PID STATE" (STATE: running|degraded)
#   sdbox.sh exec DIR CMD...     run CMD inside (all namespaces, clean environment)
#   sdbox.sh stop DIR            power off, wait until every process is gone, remove DIR
#   sdbox.sh sweep PARENT        stop every PARENT/* sandbox whose owner process is gone
#
# systemd (PID 1 of new PID, mount, UTS, IPC, net and cgroup namespaces) runs on an overlay of
# the real / whose upper layer is a tmpfs: everything it writes (tmpfiles wiping /tmp, units
# enabled under /etc, /var) stays in memory and vanishes with the sandbox. Booting systemd
# without this throwaway root would wipe the machine's real /tmp, so never shortcut it.
# SHARE, a host directory, is bind-mounted read-only at the same path inside (live content).
#
# A sandbox's disk: with SDBOX_DISK=PATH, PATH (a tmpfs the caller mounted, never a directory
# of the real / itself: overlayfs refuses an upper layer inside its lower one) holds the upper
# layer instead of a fresh tmpfs. What systemd wrote then survives `stop`, and the next `start`
# with the same SDBOX_DISK boots on it: a reboot of the same machine.
#
# Environment:
#   SDBOX_ARGS   extra systemd arguments, e.g. systemd.unit=basic.target (fast boot)
#   SDBOX_OWNER  PID of the process that owns the sandbox (default: the caller); `sweep` stops
#                sandboxes whose owner died without stopping them
#   SDBOX_EXEC_TIMEOUT  seconds after which `exec` kills CMD (default 300; exit status 124)
#   SDBOX_DISK   a tmpfs mount point that keeps the upper layer across stop and start (above)
#
# Exit status: 0 ok; 3 sandboxes are impossible here (not root, no namespaces, no cgroup2, no
# systemd): callers skip rather than fail; anything else is a real failure.
#
# The DIR base name names the cgroup (sdbox.NAME), so it must be unique among live sandboxes.
set -euo pipefail

die() { echo "sdbox: $*" >&2; exit 1; }
unavailable() { echo "sdbox: unavailable: $*" >&2; exit 3; }
[ $# -ge 2 ] || die "usage: $0 start DIR [SHARE] | exec DIR CMD... | stop DIR | sweep PARENT"

# Capabilities systemd and the commands inside never get: no kernel modules, clock, raw I/O,
# device nodes or MAC policy changes on the real machine.
DROP=-sys_module,-sys_time,-sys_rawio,-mknod,-syslog,-wake_alarm,-block_suspend,-mac_admin,-mac_override

# The cgroup2 hierarchy: /sys/fs/cgroup/unified on hybrid machines, /sys/fs/cgroup on pure v2.
cgroot() {
  local d
  for d in /sys/fs/cgroup/unified /sys/fs/cgroup; do
    [ "$(stat -f -c %T "$d" 2>/dev/null)" = cgroup2fs ] && { echo "$d"; return; }
  done
  return 1
}

# The start time of a live process: with its PID, an identity that survives PID reuse.
identity() {
  local stat rest
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  rest=${stat##*) }              # the fields after "(comm)"; comm may contain spaces
  set -- $rest                   # $1 is field 3 (state), so field 22 (starttime) is ${20}
  echo "${20}"
}

setup() {  # DIR -> globals DIR, NAME, CG
  DIR=$(realpath -m "$1"); NAME=$(basename "$DIR")
  case $NAME in *[,:[:space:]]*) die "the base name of $DIR may not contain ',', ':' or spaces";; esac
  CG=$(cgroot) || unavailable "no cgroup2 hierarchy"
  CG=$CG/sdbox.$NAME
}

# True while $DIR/pid names the sandbox's systemd, and not a recycled PID.
mine() {
  local p line; p=$(cat "$DIR/pid" 2>/dev/null) || return 1
  while read -r line; do                 # the cgroup2 line, as this side sees it
    case $line in "0::/sdbox.$NAME" | "0::/sdbox.$NAME/"*) return 0;; esac
  done < "/proc/$p/cgroup" 2>/dev/null
  return 1
}

populated() { ! grep -qs '^populated 0' "$CG/cgroup.events"; }

# Killing the namespace's PID 1 kills every process in it, and lets unshare reap systemd.
kill_systemd() { if mine; then kill -KILL "$(cat "$DIR/pid")" 2>/dev/null || true; fi; }

# Kill whatever is left in the sandbox's cgroup (cgroup.kill mistakes no PID for another).
kill_cgroup() {
  if [ -e "$CG/cgroup.kill" ]; then echo 1 > "$CG/cgroup.kill" 2>/dev/null || true
  else xargs -r kill -KILL < "$CG/cgroup.procs" 2>/dev/null || true; fi
}

# Runs as PID 1 of the new namespaces (environment: DIR SHARE DISK ARGS DROP) and becomes systemd.
# (It reaches the new bash through the environment, without comments: see `declare -f`.)
inside() {
  local R=$DIR/root f n hp U=$DIR/t
  # The throwaway root: the real / as the read-only lower layer, a tmpfs as the upper one
  # (the disk's, kept from an earlier boot, or a fresh one).
  if [ -n "$DISK" ]; then U=$DISK; else mount -t tmpfs -o mode=755 sdbox-upper "$U"; fi
  mkdir -p "$U/up" "$U/wk"
  mount -t overlay -o "lowerdir=/,upperdir=$U/up,workdir=$U/wk" sdbox-root "$R"
  # /proc, /sys and /dev must exist before systemd starts, or it mounts the real /dev.
  mount -t proc -o nosuid,nodev,noexec proc "$R/proc"
  for f in sys sysrq-trigger; do [ ! -e "$R/proc/$f" ] || mount --bind -o ro "$R/proc/$f" "$R/proc/$f"; done
  mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$R/sys"
  mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 "$R/sys/fs/cgroup"
  mount -t tmpfs -o mode=755,nosuid sdbox-dev "$R/dev"
  for n in null zero full random urandom tty console; do   # console: /dev/null, logs go to DIR
    touch "$R/dev/$n"; mount --bind "/dev/${n/console/null}" "$R/dev/$n"; done
  mkdir "$R/dev/pts" "$R/dev/shm"; ln -s pts/ptmx "$R/dev/ptmx"; ln -s /proc/self/fd "$R/dev/fd"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 devpts "$R/dev/pts"
  # /tmp: a fresh tmpfs, as the machine's tmpfiles (`D /tmp`) empties it at every boot anyway.
  # On the overlay, that emptying walked the real /tmp and whited out all of it, at every boot:
  # about a second of CPU per boot with 20 GB there (build trees, clones). Mounted before the
  # share, which may lie under /tmp.
  mount -t tmpfs -o mode=1777,nosuid,nodev sdbox-tmp "$R/tmp"
  if [ -n "$SHARE" ]; then mkdir -p "$R$SHARE"; mount --bind -o ro "$SHARE" "$R$SHARE"; fi
  # /proc is still the real one here, so this is our PID as the machine sees it. Nothing may
  # write to the real /run before pivot_root (hence LIBMOUNT_UTAB=$DIR/utab).
  # The machine's own timers stay masked: the sandbox is a machine for the tests' units, and
  # Debian's prometheus-node-exporter-apt.timer alone runs a 2 s Python collector at each boot
  # (a sixth of the e2e suite's CPU). Read from the real /etc, so a unit a test enables on a
  # kept disk is never among them.
  local masks="" t
  for t in /etc/systemd/system/timers.target.wants/*.timer; do
    [ -e "$t" ] || [ -L "$t" ] || continue
    masks+=" systemd.mask=${t##*/}"
  done
  read -r hp _ </proc/self/stat; exec 3>"$DIR/pid"
  cd "$R"; mkdir .oldroot; pivot_root . .oldroot; umount -l /.oldroot; rmdir /.oldroot
  echo "$hp" >&3; exec 3>&-                # publish the PID only once pivoted
  # shellcheck disable=SC2086 # ARGS is a list of systemd arguments
  exec env -i container=sdbox setpriv --bounding-set "$DROP" \
    /lib/systemd/systemd --system systemd.mask=console-getty.service $masks $ARGS
}

start() {
  local share=${1:-} owner=${SDBOX_OWNER:-$PPID} c p s i
  [ "$(id -u)" = 0 ] || unavailable "must run as root"
  for c in unshare nsenter setpriv; do command -v $c >/dev/null || unavailable "$c not installed"; done
  [ -x /lib/systemd/systemd ] || unavailable "/lib/systemd/systemd not installed"
  unshare --pid --fork --mount --uts --ipc --net --cgroup --propagation private true 2>/dev/null \
    || unavailable "cannot create namespaces (unshare: $(unshare --pid --fork --mount --cgroup true 2>&1 | head -1))"
  [ -z "$share" ] || share=$(realpath -e "$share") || die "no such share directory: $1"
  local disk=${SDBOX_DISK:-}
  if [ -n "$disk" ]; then
    disk=$(realpath -e "$disk") || die "no such disk: $SDBOX_DISK"
    [ "$(stat -f -c %T "$disk")" = tmpfs ] || die "the disk $disk is not a tmpfs of its own"
  fi
  [ ! -e "$CG" ] || die "$CG exists: a sandbox named $NAME is still alive (or not swept)"
  mkdir -p "$(dirname "$DIR")"
  ( flock 9                                # a concurrent sweep sees DIR only with its owner
    mkdir -p "$DIR/t" "$DIR/root"; rm -f "$DIR/pid"
    echo "$owner $(identity "$owner" || echo gone)" > "$DIR/owner"
  ) 9>"$(dirname "$DIR")/.sweep.lock"
  mkdir "$CG" || { rm -rf "$DIR"; unavailable "cannot create the cgroup $CG"; }
  # setsid: a Ctrl-C meant for the test run must not reach systemd (SIGINT = ctrl-alt-del).
  ( echo $BASHPID > "$CG/cgroup.procs"     # the new cgroup namespace is rooted at $CG
    exec setsid unshare --pid --fork --mount --uts --ipc --net --cgroup --propagation private \
      env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DIR="$DIR" LIBMOUNT_UTAB="$DIR/utab" SHARE="$share" DISK="$disk" \
        ARGS="${SDBOX_ARGS:-}" DROP=$DROP INSIDE="$(declare -f inside)" bash -euc 'eval "$INSIDE"; inside' \
      </dev/null >"$DIR/console.log" 2>&1
  ) &
  for i in $(seq 100); do [ -s "$DIR/pid" ] && break; sleep 0.05; done
  [ -s "$DIR/pid" ] || boot_failed "the sandbox did not reach pivot_root"
  p=$(cat "$DIR/pid")
  for i in $(seq 600); do
    mine || boot_failed "systemd exited during boot"
    s=$(timeout 60 nsenter -t "$p" -m -p -- systemctl is-system-running --wait 2>/dev/null || true)
    case $s in running|degraded) echo "$p $s"; return;; esac
    sleep 0.05
  done
  boot_failed "boot did not finish (is-system-running: ${s:-no answer})"
}

# Report why, with the end of systemd's console, and leave nothing behind.
boot_failed() {
  echo "sdbox: boot failed: $1; console log:" >&2
  tail -n 20 "$DIR/console.log" >&2 || true
  stop >/dev/null 2>&1 || true
  exit 1
}

stop() {
  local i
  if mine; then
    timeout 5 nsenter -t "$(cat "$DIR/pid")" -m -p -- systemctl poweroff --no-block >/dev/null 2>&1 \
      || kill_systemd
  elif [ -e "$CG" ]; then kill_cgroup; fi  # a boot that never got as far as systemd
  for i in $(seq 400); do                  # stopped means: no process of the sandbox is left
    [ -e "$CG" ] && populated || break
    case $i in 300) kill_systemd;; 340) kill_cgroup;; esac   # hard stop after 15 s
    sleep 0.05
  done
  if [ -e "$CG" ]; then
    ! populated || die "$CG still has processes"
    find "$CG" -depth -type d -exec rmdir {} \;
  fi
  # Mounts lived only in the sandbox's mount namespace: on this side DIR holds plain files.
  rm -rf --one-file-system "$DIR"
}

sweep() {
  local parent=$1 d pid t
  [ -d "$parent" ] || return 0
  exec 9>"$parent/.sweep.lock"; flock 9
  for d in "$parent"/*/; do
    [ -d "$d" ] || continue
    read -r pid t < "$d/owner" 2>/dev/null || { pid=0; t=gone; }
    [ "$t" != gone ] && [ "$(identity "$pid" || true)" = "$t" ] && continue   # owner alive
    echo "sdbox: stopping stale sandbox $d (owner $pid is gone)" >&2
    ( setup "$d"; stop ) || true
  done
}

cmd=$1; shift
case $cmd in
  start) setup "$1"; shift; start "$@";;
  exec)  setup "$1"; shift; mine || die "no sandbox running in $DIR"
         # timeout runs inside, so it kills CMD with all its children (a hung test ends).
         exec nsenter -t "$(cat "$DIR/pid")" -a -- setpriv --bounding-set "$DROP" -- \
              timeout -k 5 "${SDBOX_EXEC_TIMEOUT:-300}" \
              env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@";;
  stop)  setup "$1"; stop;;
  sweep) sweep "$(realpath -m "$1")";;
  *) die "unknown command $cmd";;
esac
