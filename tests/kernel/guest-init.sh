#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The guest's init after switch_root: it runs the host's own programs, read-only over 9p.
# Brings up the network, starts rpcbind, rpc.statd and sm-notify as a Debian client would, then
# becomes the agent that the host drives over a virtio serial port (tests/kernel/agent.py).
# Parameters come from the kernel command line: nlk.ip=ADDR/PREFIX nlk.hostname=NAME
# nlk.agent=PATH, and nlk.statd=PATH to run that nlockd binary (`--serve nsm`) in place of
# rpc.statd and sm-notify.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PYTHONDONTWRITEBYTECODE=1
# /tmp is the host's, read-only; scratch space is on /run (tmpfs).
mkdir -p /run/tmp
export TMPDIR=/run/tmp
ip="" name="" agent="" statd=""
for word in $(</proc/cmdline); do
  case "$word" in
    nlk.ip=*) ip="${word#nlk.ip=}" ;;
    nlk.hostname=*) name="${word#nlk.hostname=}" ;;
    nlk.agent=*) agent="${word#nlk.agent=}" ;;
    nlk.statd=*) statd="${word#nlk.statd=}" ;;
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

# Daemons log to the console (there is no syslog): foreground debug output, in the background.
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
  cat >/run/nlk-statd <<EOF
#!/bin/bash
"$statd" --serve nsm --listen 0.0.0.0:0 --name "$name" \\
  --store sqlite:/var/lib/nfs/nlockd.db --admin-listen 0.0.0.0:9464 \\
  --admin-allow-unauthenticated-remote true --log-level info 2>&1 | sed -u 's/^/nlockd: /' >/dev/console
EOF
  chmod +x /run/nlk-statd
  /run/nlk-statd &
  stamp "rpcbind up, nlockd --serve nsm started"
else
  rpc.statd --no-notify -F -d 2>&1 | sed -u 's/^/statd: /' >/dev/console &
  sm-notify -d 2>&1 | sed -u 's/^/sm-notify: /' >/dev/console &
  stamp "rpcbind up, rpc.statd and sm-notify started"
fi

exec python3 "$agent"
