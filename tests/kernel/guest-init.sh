#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The guest's init after switch_root: it runs the host's own programs, read-only over 9p.
# Brings up the network, starts rpcbind, rpc.statd and sm-notify as a Debian client would, then
# becomes the agent that the host drives over a virtio serial port (tests/kernel/agent.py).
# Parameters come from the kernel command line: nlk.ip=ADDR/PREFIX nlk.hostname=NAME
# nlk.agent=PATH, nlk.statd=PATH to run that nlockd binary (`--serve nsm`) in place of
# rpc.statd and sm-notify, and nlk.nfsd=DEVICE to be the kernel NFS server (scenarios 12 to 14):
# DEVICE's file system is exported, nfsd runs with the status monitor; nlk.trace=1 to run that
# nlockd under `strace -f -tt` (written to its state directory, the host's guest-state/ or
# nfsd-state/) with the dynamic linker's statistics in its log: where its start-up goes.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PYTHONDONTWRITEBYTECODE=1
# /tmp is the host's, read-only; scratch space is on /run (tmpfs).
mkdir -p /run/tmp
export TMPDIR=/run/tmp
ip="" name="" agent="" statd="" nfsd="" trace=""
for word in $(</proc/cmdline); do
  case "$word" in
    nlk.ip=*) ip="${word#nlk.ip=}" ;;
    nlk.hostname=*) name="${word#nlk.hostname=}" ;;
    nlk.agent=*) agent="${word#nlk.agent=}" ;;
    nlk.statd=*) statd="${word#nlk.statd=}" ;;
    nlk.nfsd=*) nfsd="${word#nlk.nfsd=}" ;;
    nlk.trace=*) trace="${word#nlk.trace=}" ;;
  esac
done

fail() {
  echo "guest-init: $*" >&2
  echo o >/proc/sysrq-trigger  # power off at once: the host sees QEMU exit
  exit 1
}
stamp() {
  local up
  read -r up _ </proc/uptime
  echo "guest-init: at ${up} s: $*"
}
stamp "started"

hostname "$name" || fail "cannot set the host name"
ip link set lo up || fail "no loopback"
ip addr add "$ip" dev eth0 && ip link set eth0 up || fail "cannot configure eth0"

stamp "network up"

# Daemons log to the console (there is no syslog): foreground debug output, in the background,
# each line led by its source and the guest's uptime (which the host maps to its own clock).
cat >/run/nlk-log <<'EOF'
#!/bin/bash
while IFS= read -r line; do
  read -r up _ </proc/uptime
  printf '%s: [%s] %s\n' "$1" "$up" "$line"
done >/dev/console
EOF
chmod +x /run/nlk-log

if [[ -n "$nfsd" ]]; then
  # The kernel NFS server: its export on its own disk (a power-off keeps it, and the file handles
  # the clients hold stay valid), grace periods as short as nfsd and lockd allow, 10 s (the
  # defaults are 90 s and 50 s), set before nfsd starts.
  mkdir -p /run/nlk-export
  mount -t ext4 "$nfsd" /run/nlk-export || fail "cannot mount $nfsd"
  mount -t nfsd nfsd /proc/fs/nfsd || fail "cannot mount the nfsd file system"
  echo 10 >/proc/fs/nfsd/nfsv4gracetime && echo 10 >/proc/fs/nfsd/nfsv4leasetime &&
    echo 10 >/proc/sys/fs/nfs/nlm_grace_period || fail "cannot set the grace periods"
  stamp "export mounted"
fi

rpcbind -f &
for _ in $(seq 200); do
  [[ -S /run/rpcbind.sock ]] && break
  sleep 0.05
done
[[ -S /run/rpcbind.sock ]] || fail "rpcbind did not come up"
if [[ -n "$statd" ]]; then
  # nlockd as the status monitor: NSM only (the kernel's lockd is the NLM), its state in the
  # persistent directory, the restart notification round (sm-notify's job) at its start, the
  # admin API on the guest's address for the host's checks (no token: the guest's network is the
  # rig's own tap, which only the host reaches).
  # A script of its own, so that the host can restart it (scenario 7).
  # The server's at debug level: its SM_MON of a client is how the host times a reclaim.
  # On the server, as nlockd-statd's units do: the restart round is held until nfsd runs.
  level=info hold=0
  [[ -n "$nfsd" ]] && level=debug hold=60
  wrap=""
  if [[ -n "$trace" ]]; then
    # One trace per start: the boot and the script's PID name it.
    wrap="env LD_DEBUG=statistics strace -f -tt -o /var/lib/nfs/nlockd-start.\$(cut -c1-8 \
/proc/sys/kernel/random/boot_id).\$\$.strace"
  fi
  cat >/run/nlk-statd <<EOF
#!/bin/bash
$wrap "$statd" --serve nsm --listen 0.0.0.0:0 --name "$name" \\
  --store sqlite:/var/lib/nfs/nlockd.db --admin-listen 0.0.0.0:9464 \\
  --admin-allow-unauthenticated-remote true --log-level $level --notify-hold $hold \\
  --pid-file /run/nlockd.pid 2>&1 | /run/nlk-log nlockd
EOF
  chmod +x /run/nlk-statd
  # Sourced in the background, as rpc.statd's pipeline below is started: the script's own bash
  # would start first otherwise, on the guest's one CPU, and its start count as nlockd's.
  . /run/nlk-statd &
  stamp "rpcbind up, nlockd --serve nsm started"
else
  rpc.statd --no-notify -F -d 2>&1 | /run/nlk-log statd &
  if [[ -z "$nfsd" ]]; then
    sm-notify -d 2>&1 | /run/nlk-log sm-notify &
    stamp "rpcbind up, rpc.statd and sm-notify started"
  else
    # A server notifies once nfsd serves (Debian orders rpc-statd-notify after nfs-server).
    stamp "rpcbind up, rpc.statd started"
  fi
fi

if [[ -n "$nfsd" ]]; then
  # As Debian's nfs-server unit: after the status monitor (registered with rpcbind, so that
  # lockd's first SM_MON reaches it), export, mountd, nfsd (NFSv3: the rig's clients mount
  # vers=3), then for rpc.statd the notification round.
  for _ in $(seq 600); do
    rpcinfo -T udp 127.0.0.1 status 1 >/dev/null 2>&1 && break
    sleep 0.05
  done
  stamp "status monitor registered"
  # What the nfs-kernel-server package creates in /var/lib/nfs.
  touch /var/lib/nfs/etab /var/lib/nfs/rmtab
  exportfs -i -o rw,sync,no_root_squash,no_subtree_check,insecure,fsid=1 \
    "${ip%.*}.0/${ip#*/}:/run/nlk-export" || fail "exportfs failed"
  rpc.mountd -F 2>&1 | /run/nlk-log mountd &
  out=$(rpc.nfsd --no-nfs-version 4 4 2>&1) || fail "rpc.nfsd failed: $out"
  stamp "nfsd started"
  if [[ -z "$statd" ]]; then
    sm-notify -d 2>&1 | /run/nlk-log sm-notify &
    stamp "sm-notify started"
  else
    # rpc-statd-notify.service's job under nlockd-statd: the held round goes out now.
    kill -USR2 "$(</run/nlockd.pid)" || fail "cannot signal nlockd"
    stamp "nlockd told to notify"
  fi
fi

exec python3 "$agent"
