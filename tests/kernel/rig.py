#!/usr/bin/env python3
"""Host side of the kernel client rig (docs/kernel-rig.md). run.sh starts it inside a network
namespace of its own with a private /run; it starts rpcbind, NFS-Ganesha (NFSv3, its NLM off)
and nlockd there, boots a Debian kernel under QEMU as the NFS client, and drives the guest's
agent (agent.py) through the scenarios.

Every wait polls for an event with a deadline; no step sleeps for a fixed time.
"""
import argparse
import json
import os
import grp
import pwd
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request

from agent import lines_of

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER_IP = "10.197.0.1"
GUEST_IP = "10.197.0.2"
TAP = "nlktap0"
ADMIN = "127.0.0.1:9464"
# The guest's nlockd (scenario 4) serves its admin API on the guest's address.
GUEST_ADMIN = GUEST_IP + ":9464"
NLOCKD_PORT = 4045
GUEST_NAME = "nlk-guest"
# Where the guest mounts the export: its /run is tmpfs. (Not /tmp: the guest sees the host's
# /tmp, where this tree or nlockd's binary may live.)
GUEST_MNT = "/run/nlk"
# What a Debian client uses by default: NFSv3 over TCP with locking through lockd.
DEFAULT_OPTS = "vers=3,lock"
# A kernel that missed the GRANTED callback retries its blocked lock after 30 s, and one that got
# DENIED_GRACE_PERIOD retries after 5 s: waits shorter than those tell the paths apart.
CALLBACK_DEADLINE = 10.0
BOOT_DEADLINE = 300.0


class Failure(Exception):
    pass


def now():
    return time.monotonic()


def wait_for(what, check, timeout, interval=0.02):
    """Polls check() until it returns something true, and returns that."""
    deadline = now() + timeout
    while True:
        value = check()
        if value:
            return value
        if now() >= deadline:
            raise Failure("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def run(argv, check=True):
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and done.returncode != 0:
        raise Failure("%s failed (%d): %s" % (" ".join(argv), done.returncode, done.stdout.strip()))
    return done


def tail(path, lines=40, skip=None):
    """The last lines of a log, without those matching skip (the rig's own API polling)."""
    try:
        with open(path, errors="replace") as f:
            kept = [line for line in f if not (skip and re.search(skip, line))]
            return "".join(kept[-lines:])
    except OSError as e:
        return "(cannot read %s: %s)\n" % (path, e)


class Process:
    """A server-side daemon with its output in a log file of the work directory."""

    def __init__(self, name, argv, log_path):
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)

    def alive(self):
        return self.proc.poll() is None

    def check_alive(self):
        if not self.alive():
            raise Failure("%s exited with %s; its log ends:\n%s" %
                          (self.name, self.proc.returncode, tail(self.log_path)))

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Returns the exit status, or None if it was still running and had to be killed."""
        status = self.proc.poll()
        if status is None:
            self.proc.send_signal(sig)
            try:
                status = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return status


def rpcinfo_has(program, version, netid):
    done = run(["rpcinfo", "-p", "127.0.0.1"], check=False)
    if done.returncode != 0:
        return False
    pattern = re.compile(r"^\s*%d\s+%d\s+%s\s" % (program, version, netid), re.M)
    return bool(pattern.search(done.stdout))


class Admin:
    """nlockd's admin API (docs/api.md), reached on the namespace's loopback (or, for the
    guest's nlockd, on the guest's address)."""

    def __init__(self, address=ADMIN):
        self.address = address
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(self, path):
        try:
            with self.opener.open("http://%s%s" % (self.address, path), timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except (urllib.error.URLError, OSError):
            return None, ""

    def json(self, path):
        status, body = self.get(path)
        if status != 200:
            raise Failure("GET %s answered %s: %s" % (path, status, body))
        return json.loads(body)

    def ready(self):
        return self.get("/readyz")[0] == 200

    def locks(self, host=GUEST_IP):
        return self.json("/api/v1/locks?host=%s&limit=1000" % host)["locks"]

    def waiters(self, host=GUEST_IP):
        return self.json("/api/v1/waiters?host=%s&limit=1000" % host)["waiters"]

    def metric(self, name, **labels):
        """The sum of a metric's samples whose labels include these."""
        status, body = self.get("/metrics")
        if status != 200:
            return None
        total = 0.0
        for line in body.splitlines():
            m = re.match(r"^%s(\{[^}]*\})?\s+(\S+)$" % re.escape(name), line)
            if not m:
                continue
            have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(m.group(2))
        return total


class AgentLink:
    """The host's end of the guest agent's serial port: JSON lines both ways."""

    def __init__(self, path, qemu):
        self.qemu = qemu
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        wait_for("QEMU's agent socket", lambda: self._connect(path), 30)
        self.cond = threading.Condition()
        self.replies = {}
        self.events = []
        self.closed = False
        self.next_id = 1
        threading.Thread(target=self._read, daemon=True).start()

    def _connect(self, path):
        if self.qemu.poll() is not None:
            raise Failure("QEMU exited with %s before it listened" % self.qemu.returncode)
        try:
            self.sock.connect(path)
            return True
        except (FileNotFoundError, ConnectionRefusedError):
            return False

    def _recv(self):
        try:
            return self.sock.recv(65536)
        except OSError:
            return b""

    def _read(self):
        for line in lines_of(self._recv):
            try:
                msg = json.loads(line)
            except ValueError:
                msg = {"event": "garbage", "line": line.decode(errors="replace")}
            with self.cond:
                if "id" in msg:
                    self.replies[msg["id"]] = msg
                else:
                    msg["host_time"] = now()
                    self.events.append(msg)
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def _wait(self, what, pick, timeout):
        deadline = now() + timeout
        with self.cond:
            while True:
                value = pick()
                if value is not None:
                    return value
                if self.closed:
                    raise Failure("guest connection closed while waiting for %s" % what)
                if self.qemu.poll() is not None:
                    raise Failure("QEMU exited (%s) while waiting for %s" %
                                  (self.qemu.returncode, what))
                left = deadline - now()
                if left <= 0:
                    raise Failure("timed out after %.0f s waiting for %s" % (timeout, what))
                self.cond.wait(min(left, 0.5))

    def send(self, **req):
        with self.cond:
            req["id"] = self.next_id
            self.next_id += 1
        self.sock.sendall((json.dumps(req) + "\n").encode())
        return req["id"]

    def reply(self, req_id, timeout, what="a reply"):
        return self._wait(what, lambda: self.replies.pop(req_id, None), timeout)

    def event(self, name, timeout):
        def pick():
            for e in self.events:
                if e["event"] in (name, "failed"):
                    return e
            return None
        e = self._wait("guest event %s" % name, pick, timeout)
        if e["event"] == "failed":
            raise Failure("guest: " + e.get("error", "failed"))
        return e

    def has_event(self, name):
        with self.cond:
            return next((e for e in self.events if e["event"] == name), None)

    def sh(self, cmd, timeout=60, check=True):
        r = self.reply(self.send(op="sh", cmd=cmd, timeout=timeout), timeout + 10, cmd)
        if check and r["rc"] != 0:
            raise Failure("guest: `%s` exited %s: %s" % (cmd, r["rc"], r["out"].strip()))
        return r

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Worker:
    """A process in the guest that owns POSIX locks (see agent.py)."""

    def __init__(self, agent, name):
        self.agent = agent
        self.name = name

    def start(self, op, **args):
        return self.agent.send(op=op, worker=self.name, **args)

    def finish(self, req_id, timeout=CALLBACK_DEADLINE, what=None):
        return self.agent.reply(req_id, timeout, what or "worker %s" % self.name)

    def call(self, op, timeout=CALLBACK_DEADLINE, **args):
        return self.finish(self.start(op, **args), timeout, "%s %s %r" % (self.name, op, args))

    def open(self, path, key=None):
        r = self.call("open", path=path, file=key or path, timeout=60)
        if not r["ok"]:
            raise Failure("%s: open %s: %s" % (self.name, path, r["error"]))

    def lock(self, path, kind="w", wait=False, **range_):
        return self.call("lock", file=path, type=kind, wait=wait, **range_)

    def must_lock(self, path, kind="w", **range_):
        r = self.lock(path, kind, **range_)
        if not r["ok"]:
            raise Failure("%s: %s lock on %s refused: %s" % (self.name, kind, path, r["error"]))
        return r

    def must_be_denied(self, path, kind="w", **range_):
        r = self.lock(path, kind, **range_)
        if r["ok"]:
            raise Failure("%s: conflicting %s lock on %s was granted" % (self.name, kind, path))
        # EAGAIN or EACCES is a refusal; anything else (ENOLCK, EIO) is a failure of its own.
        if r["errno"] not in (11, 13):
            raise Failure("%s: %s lock on %s failed instead of being denied: %s" %
                          (self.name, kind, path, r["error"]))
        return r

    def close(self, path):
        r = self.call("close", file=path)
        if not r["ok"]:
            raise Failure("%s: close %s: %s" % (self.name, path, r["error"]))


class Rig:
    def __init__(self, args):
        self.args = args
        self.work = args.work
        self.admin = Admin()
        self.rpcbind = self.ganesha = self.nlockd = None
        self.qemu = self.agent = None
        self.boots = 0
        self.nlockd_statd = False
        self.mounted = set()
        self.export = os.path.join(self.work, "export")
        self.notes = []

    # --- server side ---------------------------------------------------------------------

    def start_server_side(self):
        run(["ip", "tuntap", "add", "dev", TAP, "mode", "tap"])
        run(["ip", "addr", "add", SERVER_IP + "/24", "dev", TAP])
        run(["ip", "link", "set", TAP, "up"])
        self.rpcbind = Process("rpcbind", ["rpcbind", "-f"], self.path("rpcbind.log"))
        wait_for("rpcbind", lambda: self.rpcbind.check_alive() or
                 run(["rpcinfo", "-p", "127.0.0.1"], check=False).returncode == 0, 30)
        self.start_ganesha()
        self.start_nlockd()

    def path(self, name):
        return os.path.join(self.work, name)

    def start_ganesha(self):
        os.makedirs(self.export, exist_ok=True)
        os.chmod(self.export, 0o777)
        conf = self.path("ganesha.conf")
        with open(conf, "w") as f:
            f.write(GANESHA_CONF % {"export": self.export,
                                    "recovery": self.path("ganesha-recovery")})
        self.ganesha = Process("ganesha", [
            "ganesha.nfsd", "-F", "-f", conf, "-L", self.path("ganesha.log"),
            "-p", self.path("ganesha.pid")], self.path("ganesha.out"))
        # Ganesha is serving once MOUNT and NFSv3 are registered on both transports.
        wait_for("Ganesha's rpcbind registrations", lambda: self.ganesha.check_alive() or all(
            rpcinfo_has(p, v, t) for p, v in ((100003, 3), (100005, 3)) for t in ("tcp", "udp")),
            60)
        if rpcinfo_has(100021, 4, "tcp"):
            raise Failure("Ganesha registered NLM although its config turns it off")

    def start_nlockd(self):
        self.nlockd = Process("nlockd", [
            self.args.nlockd, "--listen", "0.0.0.0:%d" % NLOCKD_PORT, "--name", SERVER_IP,
            "--store", "sqlite:" + self.path("nlockd.db"), "--admin-listen", ADMIN,
            "--log-level", "debug"], self.path("nlockd.log"))
        wait_for("nlockd ready and registered", lambda: self.nlockd.check_alive() or (
            self.admin.ready() and rpcinfo_has(100021, 4, "tcp") and
            rpcinfo_has(100021, 4, "udp")), 30)

    # --- the guest -----------------------------------------------------------------------

    def boot(self, nlockd_statd=False):
        """Starts QEMU; returns at once. wait_ready() waits for the agent. nlockd_statd: the
        guest runs nlockd --serve nsm in place of rpc.statd and sm-notify."""
        self.boots += 1
        self.nlockd_statd = nlockd_statd
        state = self.path("guest-state")
        if not os.path.isdir(state):
            # What nfs-common lays out in /var/lib/nfs; statd runs as the owner of sm/.
            statd_uid = pwd.getpwnam("statd").pw_uid
            nogroup = grp.getgrnam("nogroup").gr_gid
            os.makedirs(state, 0o755)
            for d in ("sm", "sm.bak"):
                os.mkdir(os.path.join(state, d), 0o755)
                os.chown(os.path.join(state, d), statd_uid, nogroup)
            open(os.path.join(state, "state"), "w").close()
            os.chown(os.path.join(state, "state"), statd_uid, 0)
        sock = self.path("agent-%d.sock" % self.boots)
        self.console = self.path("console-%d.log" % self.boots)
        append = " ".join([
            # Under emulation the TSC calibrates wrongly: keep time by the HPET.
            "console=ttyS0", "panic=-1", "tsc=unstable",
            "nlk.init=" + os.path.join(HERE, "guest-init.sh"),
            "nlk.ip=%s/24" % GUEST_IP, "nlk.hostname=" + GUEST_NAME,
            "nlk.agent=" + os.path.join(HERE, "agent.py")] +
            (["nlk.statd=" + self.args.nlockd] if nlockd_statd else []))
        argv = [
            "qemu-system-x86_64", "-nodefaults", "-no-user-config", "-display", "none",
            "-no-reboot", "-accel", "tcg", "-m", "512", "-smp", "1",
            "-kernel", self.args.kernel, "-initrd", self.args.initrd, "-append", append,
            "-serial", "file:" + self.console,
            "-netdev", "tap,id=net0,ifname=%s,script=no,downscript=no" % TAP,
            "-device", "virtio-net-pci,netdev=net0,mac=52:54:00:c1:a0:02",
            "-fsdev", "local,id=hostroot,path=/,security_model=passthrough,readonly=on,"
            "multidevs=remap",
            "-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
            "-fsdev", "local,id=nfsstate,path=%s,security_model=passthrough,multidevs=remap" %
            state,
            "-device", "virtio-9p-pci,fsdev=nfsstate,mount_tag=nfsstate",
            "-device", "virtio-rng-pci",
            "-device", "virtio-serial-pci",
            "-chardev", "socket,id=agent,path=%s,server=on,wait=off" % sock,
            "-device", "virtserialport,chardev=agent,name=nlk.agent",
        ]
        self.qemu_log = open(self.path("qemu-%d.log" % self.boots), "wb")
        self.boot_started = now()
        self.qemu = subprocess.Popen(argv, stdout=self.qemu_log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.agent = AgentLink(sock, self.qemu)
        self.mounted = set()

    def wait_ready(self):
        """Seconds from QEMU's start to the agent's word that rpc.statd is up."""
        ready = self.agent.event("ready", BOOT_DEADLINE)
        self.notes.append("boot %d: agent ready at guest uptime %.1f s" %
                          (self.boots, ready["uptime"]))
        return ready["host_time"] - self.boot_started

    def power_off(self):
        """Pulls the plug: no shutdown, no unmount, nothing reaches the server."""
        if self.qemu and self.qemu.poll() is None:
            self.note_cpu()
            self.qemu.kill()
            self.qemu.wait()
        if self.agent:
            self.agent.close()
        if self.qemu:
            self.qemu_log.close()
        self.qemu = self.agent = None

    def note_cpu(self):
        """What the emulated guest cost the host, for CI's budget."""
        try:
            with open("/proc/%d/stat" % self.qemu.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            self.notes.append("boot %d: QEMU used %.1f s of CPU in %.1f s" %
                              (self.boots, cpu, now() - self.boot_started))
        except (OSError, IndexError, ValueError):
            pass

    def mount(self, name, opts, sharecache=True):
        """Mounts the export at MNT/NAME in the guest (once per boot)."""
        point = "%s/%s" % (GUEST_MNT, name)
        if name in self.mounted:
            return point
        if not sharecache:
            opts += ",nosharecache"
        t0 = now()
        self.agent.sh("mkdir -p %s && mount -t nfs -o %s %s:%s %s" %
                      (point, opts, SERVER_IP, self.export, point), timeout=120)
        self.notes.append("mount %s (%s) %.2f s" % (name, opts, now() - t0))
        self.mounted.add(name)
        return point

    def mount_pair(self, label="tcp", opts=DEFAULT_OPTS):
        """Two mounts of the export, the second with nosharecache, so that two processes of
        the guest contend at the server rather than inside the guest's kernel."""
        return (self.mount(label + "1", opts), self.mount(label + "2", opts, sharecache=False))

    def kernel_has(self, option):
        with open(self.args.kernel_config) as f:
            return ("%s=y\n" % option) in f.read()

    def settle(self):
        """After a failed scenario: end the guest's lock owners, so that the next scenario
        starts with nothing held."""
        try:
            if self.qemu is not None and self.qemu.poll() is None and self.nlockd.alive():
                self.agent.reply(self.agent.send(op="reset"), 30, "the agent's reset")
                wait_for("the guest's locks to go after the reset", lambda: not self.admin.locks(),
                         30)
        except Failure as e:
            print("kernel: the guest does not settle (%s); booting it again" % e, flush=True)
            self.power_off()

    def stop(self):
        self.power_off()
        for p in (self.nlockd, self.ganesha, self.rpcbind):
            if p and not p.log.closed:
                p.stop()

    def logs(self):
        out = []
        if self.boots:
            out.append("--- guest console (boot %d) ---\n%s" % (self.boots, tail(self.console, 60)))
        out.append("--- nlockd.log ---\n%s" %
                   tail(self.path("nlockd.log"), 40, r"admin: (GET|HEAD) "))
        out.append("--- ganesha.log ---\n%s" % tail(self.path("ganesha.log"), 15))
        return "\n".join(out)


GANESHA_CONF = """\
# NFSv3 only, without Ganesha's own NLM: clients find nlockd's nlockmgr through rpcbind.
NFS_CORE_PARAM {
    Protocols = 3;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Plugins_Dir = /usr/lib/x86_64-linux-gnu/ganesha;
}
NFSv4 {
    Graceless = true;
    RecoveryRoot = %(recovery)s;
}
EXPORT {
    Export_Id = 1;
    Path = %(export)s;
    Pseudo = /export;
    Protocols = 3;
    Transports = TCP, UDP;
    Access_Type = RW;
    Squash = No_Root_Squash;
    SecType = sys;
    FSAL {
        Name = VFS;
    }
}
LOG {
    Default_Log_Level = EVENT;
}
"""

# --- scenarios ---------------------------------------------------------------------------


def locks_and_grant(rig, label, opts):
    """Locks through the kernel reach nlockd; a second owner is refused; a blocked lock is
    granted by nlockd's callback right after the unlock."""
    m1, m2 = rig.mount_pair(label, opts)
    a, b = Worker(rig.agent, label + "-a"), Worker(rig.agent, label + "-b")
    f1, f2 = "%s/grant-%s" % (m1, label), "%s/grant-%s" % (m2, label)
    a.open(f1)
    b.open(f2)
    r = a.must_lock(f1, "w")
    lock_ms = (r["t1"] - r["t0"]) * 1000
    held = rig.admin.locks()
    if len(held) != 1 or not held[0]["exclusive"]:
        raise Failure("nlockd does not show the guest's one exclusive lock: %s" % held)
    a_svid = held[0]["svid"]
    denied = rig.admin.metric("nlm_requests_total", procedure="LOCK", result="denied")
    b.must_be_denied(f2, "w")
    b.must_be_denied(f2, "r")
    # Byte ranges: disjoint ones of two owners coexist, overlapping ones conflict.
    a.must_lock(f1, "u")
    a.must_lock(f1, "w", start=0, len=100)
    b.must_lock(f2, "w", start=100, len=100)
    b.must_be_denied(f2, "w", start=50, len=100)
    # The refusals came from nlockd, not from the guest's kernel.
    wait_for("nlockd to count three refusals", lambda: rig.admin.metric(
        "nlm_requests_total", procedure="LOCK", result="denied") >= denied + 3, 10)
    if len(rig.admin.locks()) != 2:
        raise Failure("nlockd should hold two range locks: %s" % rig.admin.locks())
    b.must_lock(f2, "u", start=100, len=100)
    a.must_lock(f1, "u", start=0, len=100)
    # Shared locks of two owners coexist.
    a.must_lock(f1, "r")
    b.must_lock(f2, "r")
    b.must_lock(f2, "u")
    a.must_lock(f1, "w")
    # The blocked request waits at nlockd, then the unlock frees it.
    callbacks = rig.admin.metric("nlm_callbacks_total", result="ok")
    pending = b.start("lock", file=f2, type="w", wait=True)
    wait_for("nlockd to queue the blocked lock", lambda: len(rig.admin.waiters()) == 1, 30)
    unlock = a.must_lock(f1, "u")
    granted = b.finish(pending, CALLBACK_DEADLINE, "the blocked lock's grant")
    if not granted["ok"]:
        raise Failure("blocked lock failed: %s" % granted["error"])
    # From the unlock call: the grant can overtake the UNLOCK reply on its way to the guest.
    grant_ms = (granted["t1"] - unlock["t0"]) * 1000
    # The callback counts once the client acknowledged it (GRANTED_RES may trail the grant).
    wait_for("nlockd to count the acknowledged GRANTED callback",
             lambda: rig.admin.metric("nlm_callbacks_total", result="ok") > callbacks, 10)
    held = rig.admin.locks()
    if len(held) != 1 or held[0]["svid"] == a_svid:
        raise Failure("after the grant nlockd should hold the waiter's lock only: %s" % held)
    b.must_lock(f2, "u")
    a.close(f1)
    b.close(f2)
    wait_for("the guest's locks to be gone at nlockd", lambda: not rig.admin.locks(), 10)
    return "lock %.0f ms, unlock %.0f ms, grant-after-unlock %.0f ms" % (
        lock_ms, (unlock["t1"] - unlock["t0"]) * 1000, grant_ms)


def scenario_locks_tcp(rig):
    return locks_and_grant(rig, "tcp", DEFAULT_OPTS)


def scenario_locks_udp(rig):
    if not rig.kernel_has("CONFIG_NFS_DISABLE_UDP_SUPPORT"):
        return locks_and_grant(rig, "udp", DEFAULT_OPTS + ",proto=udp")
    # Debian's kernels refuse NFS over UDP, and their NLM client follows the NFS transport, so
    # lockd speaks TCP whatever the mount says. What stays UDP is MOUNT, and NSM (sm-notify,
    # statd and nlockd's notifier), which scenarios 2 and 3 use. Check the refusal, so that a
    # kernel that brings UDP back runs the full scenario above.
    probe = GUEST_MNT + "/udp-probe"
    refused = rig.agent.sh("mkdir -p %s && mount -t nfs -o %s,proto=udp %s:%s %s" %
                           (probe, DEFAULT_OPTS, SERVER_IP, rig.export, probe), check=False)
    if refused["rc"] == 0:
        raise Failure("the kernel's config disables NFS over UDP, yet a UDP mount worked")
    detail = locks_and_grant(rig, "mntudp", DEFAULT_OPTS + ",mountproto=udp")
    return detail + "; NFS/NLM over UDP: not in this kernel (CONFIG_NFS_DISABLE_UDP_SUPPORT=y), " \
        "MOUNT over UDP only"


def scenario_restart(rig):
    """kill -9 of nlockd and a restart on the same store: the kernel reclaims through its
    statd's SM_NOTIFY; the lock stays held; an unrelated lock is granted during grace."""
    m1, m2 = rig.mount_pair()
    a, b, c = (Worker(rig.agent, "restart-" + n) for n in "abc")
    held_path, other = m1 + "/restart-held", m2 + "/restart-held"
    new_path = m2 + "/restart-new"
    a.open(held_path)
    b.open(other)
    c.open(new_path)
    a.must_lock(held_path, "w")
    wait_for("nlockd to record the lock", lambda: len(rig.admin.locks()) == 1, 10)
    rig.nlockd.stop(signal.SIGKILL)
    t0 = now()
    rig.start_nlockd()
    ready_s = now() - t0
    wait_for("the kernel's reclaim", lambda: rig.admin.metric("nlm_reclaims_total") >= 1, 60)
    reclaim_s = now() - t0
    if not rig.admin.metric("nsm_notifications_total", result="delivered"):
        raise Failure("the reclaim came without a delivered SM_NOTIFY")
    held = rig.admin.locks()
    if len(held) != 1 or held[0]["awaiting_reclaim"]:
        raise Failure("after the reclaim nlockd should hold the one lock: %s" % held)
    b.must_be_denied(other, "w")
    r = c.must_lock(new_path, "w")
    new_ms = (r["t1"] - r["t0"]) * 1000
    refused = rig.admin.metric("nlm_requests_total", result="denied_grace_period")
    if refused:
        raise Failure("nlockd refused %d requests for the grace period" % refused)
    for w, p in ((a, held_path), (b, other), (c, new_path)):
        w.close(p)
    wait_for("the guest's locks to be gone at nlockd", lambda: not rig.admin.locks(), 10)
    return ("ready %.2f s, restart-to-reclaim %.2f s, new lock during grace %.0f ms" %
            (ready_s, reclaim_s, new_ms))


def scenario_reboot(rig):
    """The guest loses power while it holds locks; once booted again, its sm-notify reaches
    nlockd, which releases them."""
    m1, m2 = rig.mount_pair()
    a, b = Worker(rig.agent, "reboot-a"), Worker(rig.agent, "reboot-b")
    a.open(m1 + "/reboot-1")
    b.open(m2 + "/reboot-2")
    a.must_lock(m1 + "/reboot-1", "w")
    b.must_lock(m2 + "/reboot-2", "r")
    wait_for("nlockd to record both locks", lambda: len(rig.admin.locks()) == 2, 10)
    state_before = guest_state_number(rig)
    rig.power_off()
    if len(rig.admin.locks()) != 2:
        raise Failure("locks went away before the guest came back")
    t0 = now()
    rig.boot()

    def released():
        # sm-notify starts before the agent is ready; past that it gets a minute.
        ready = rig.agent.has_event("ready")
        if ready and now() > ready["host_time"] + 60:
            raise Failure("nlockd still holds the locks a minute after the guest came back")
        if rig.qemu.poll() is not None:
            raise Failure("QEMU exited (%s) during the boot" % rig.qemu.returncode)
        return not rig.admin.locks() and now()

    released_at = wait_for("nlockd to release the rebooted guest's locks", released,
                           BOOT_DEADLINE)
    boot_s = rig.wait_ready()
    state_after = guest_state_number(rig)
    if state_after <= state_before:
        raise Failure("the guest's NSM state did not advance across the reboot (%d -> %d)" %
                      (state_before, state_after))
    crashes = rig.admin.metric("nsm_crashes_detected_total")
    if not crashes:
        raise Failure("nlockd released the locks without seeing the reboot")
    # The new boot can take the same lock again.
    m1, _ = rig.mount_pair()
    c = Worker(rig.agent, "reboot-c")
    c.open(m1 + "/reboot-1")
    c.must_lock(m1 + "/reboot-1", "w")
    c.close(m1 + "/reboot-1")
    return ("boot %.1f s, reboot-to-release %.1f s, guest NSM state %d -> %d" %
            (boot_s, released_at - t0, state_before, state_after))


def scenario_nlockd_statd(rig):
    """The guest runs nlockd --serve nsm in place of rpc.statd: the kernel's lockd monitors the
    server through it; the server's restart makes it call the kernel back (procedure 16, from a
    privileged loopback port), and the kernel reclaims; after the guest's power-off, its
    restart notification reaches the server, which releases the old locks."""
    guest = Admin(GUEST_ADMIN)
    boot_s = "at the rig's start"
    if not rig.nlockd_statd:
        rig.power_off()
        rig.boot(nlockd_statd=True)
        boot_s = "%.1f s" % rig.wait_ready()
    m1, m2 = rig.mount_pair()
    a, b = Worker(rig.agent, "statd-a"), Worker(rig.agent, "statd-b")
    held_path, other = m1 + "/statd-held", m2 + "/statd-held"
    a.open(held_path)
    b.open(other)
    a.must_lock(held_path, "w")
    wait_for("nlockd to record the lock", lambda: len(rig.admin.locks()) == 1, 10)
    # The kernel's SM_MON: the server by address, calling back NLM version 3 procedure 16.
    clients = guest.json("/api/v1/clients?mon_name=%s" % SERVER_IP)["clients"]
    if not any(c["my_prog"] == 100021 and c["my_proc"] == 16 and c["my_name"] == GUEST_NAME
               for c in clients):
        raise Failure("the guest's nlockd holds no kernel registration for the server: %s" %
                      clients)
    if rpcinfo_in_guest(rig, "nlockmgr") is None:
        raise Failure("the guest's kernel lockd is not registered")
    callbacks = guest.metric("nlm_callbacks_total", kind="status", result="ok") or 0
    rig.nlockd.stop(signal.SIGKILL)
    t1 = now()
    rig.start_nlockd()
    wait_for("the guest's nlockd to call its kernel back", lambda: (guest.metric(
        "nlm_callbacks_total", kind="status", result="ok") or 0) > callbacks, 60, interval=0.05)
    callback_s = now() - t1
    # The restarted server counts from zero.
    wait_for("the kernel's reclaim", lambda: rig.admin.metric("nlm_reclaims_total") >= 1, 60)
    reclaim_s = now() - t1
    held = rig.admin.locks()
    if len(held) != 1 or held[0]["awaiting_reclaim"]:
        raise Failure("after the reclaim nlockd should hold the one lock: %s" % held)
    b.must_be_denied(other, "w")
    b.close(other)
    # The guest loses power holding the lock; its nlockd's restart round tells the server.
    state_before = guest.json("/api/v1/status")["state_number"]
    rig.power_off()
    t2 = now()
    rig.boot(nlockd_statd=True)
    released_at = wait_for("the server to release the rebooted guest's lock",
                           lambda: not rig.admin.locks() and now(), BOOT_DEADLINE)
    rig.wait_ready()
    state_after = guest.json("/api/v1/status")["state_number"]
    if state_after <= state_before:
        raise Failure("the guest nlockd's state did not advance across the reboot (%d -> %d)" %
                      (state_before, state_after))
    m1, _ = rig.mount_pair()
    c = Worker(rig.agent, "statd-c")
    c.open(m1 + "/statd-held")
    c.must_lock(m1 + "/statd-held", "w")
    c.close(m1 + "/statd-held")
    return ("boot %s, server restart to the guest's callback %.2f s, restart-to-reclaim "
            "%.2f s, reboot-to-release %.1f s, guest state %d -> %d" %
            (boot_s, callback_s, reclaim_s, released_at - t2, state_before, state_after))


def rpcinfo_in_guest(rig, name):
    r = rig.agent.sh("rpcinfo -p 127.0.0.1", check=False)
    return r["out"] if name in r["out"] else None


def guest_state_number(rig):
    r = rig.agent.sh("od -An -t d4 /var/lib/nfs/state")
    return int(r["out"].split()[0])


SCENARIOS = {
    # Scenario 5 (nlockd as Ganesha's status monitor) plugs in here; see docs/kernel-rig.md.
    "1": ("kernel locks, conflicts, blocked lock granted by callback (TCP)", scenario_locks_tcp),
    "6": ("the same over UDP mounts where the kernel has them", scenario_locks_udp),
    "2": ("nlockd kill -9 and restart: kernel reclaims", scenario_restart),
    "3": ("guest power-off and reboot: sm-notify releases its locks", scenario_reboot),
    "4": ("nlockd --serve nsm as the guest's status monitor: callback, reclaim, reboot",
          scenario_nlockd_statd),
}
ORDER = ["1", "6", "2", "3", "4"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nlockd", required=True)
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--initrd", required=True)
    parser.add_argument("--kernel-config", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args()
    wanted = args.scenarios or ORDER
    unknown = [s for s in wanted if s not in SCENARIOS]
    if unknown:
        print("kernel: unknown scenario %s (have %s)" % (" ".join(unknown), " ".join(ORDER)))
        return 2
    wanted = [s for s in ORDER if s in wanted]

    rig = Rig(args)
    passed = failed = 0
    started = now()
    try:
        try:
            t0 = now()
            rig.start_server_side()
            print("kernel: server side up in %.1f s (rpcbind, Ganesha, nlockd)" % (now() - t0),
                  flush=True)
            # Scenario 4 alone: the guest runs nlockd as its status monitor from the first boot.
            rig.boot(nlockd_statd=wanted == ["4"])
            print("kernel: guest booted in %.1f s" % rig.wait_ready(), flush=True)
            t0 = now()
            rig.mount_pair()
            print("kernel: first mounts in %.1f s" % (now() - t0), flush=True)
        except Failure as e:
            print("FAIL setup: %s\n%s" % (e, rig.logs()), flush=True)
            print("kernel: 0 passed, %d failed" % len(wanted))
            return 1
        for key in wanted:
            title, fn = SCENARIOS[key]
            t0 = now()
            try:
                detail = fn(rig)
                passed += 1
                print("PASS %s %s (%.1f s): %s" % (key, title, now() - t0, detail), flush=True)
            except Failure as e:
                failed += 1
                print("FAIL %s %s (%.1f s): %s\n%s" % (key, title, now() - t0, e, rig.logs()),
                      flush=True)
                rig.settle()
                if rig.qemu is None or rig.qemu.poll() is not None or not rig.nlockd.alive():
                    # Later scenarios need a running guest and nlockd: bring back what died.
                    try:
                        if not rig.nlockd.alive():
                            rig.start_nlockd()
                        if rig.qemu is None or rig.qemu.poll() is not None:
                            rig.power_off()
                            rig.boot()
                            rig.wait_ready()
                    except Failure as again:
                        print("kernel: cannot recover for the next scenario: %s" % again)
                        failed += len(wanted) - passed - failed
                        break
    except Exception:
        # A bug of the rig: what did not run counts as failed.
        traceback.print_exc()
        failed = len(wanted) - passed
    finally:
        # nlockd must stop cleanly: a sanitizer's report (a leak found at exit) fails the run.
        if rig.nlockd and rig.nlockd.alive():
            status = rig.nlockd.stop()
            if status != 0:
                failed += 1
                print("FAIL nlockd exited with %s on SIGTERM; its log ends:\n%s" %
                      (status, tail(rig.path("nlockd.log"), 60, r"admin: (GET|HEAD) ")))
        rig.stop()
        for note in rig.notes:
            print("kernel: " + note)
        print("kernel: %.0f s in all" % (now() - started))
    print("kernel: %d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 and passed == len(wanted) else 1


if __name__ == "__main__":
    sys.exit(main())
