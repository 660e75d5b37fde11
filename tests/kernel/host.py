# SPDX-License-Identifier: Apache-2.0
"""The host's side of the kernel client rig (docs/kernel-rig.md): the server-side daemons
(rpcbind, NFS-Ganesha, nlockd, and for some scenarios rpc.statd), the guests under QEMU (the
NFS client, and for scenarios 12 to 14 the kernel NFS server), and the links to their agents
(agent.py). The scenarios (scenarios.py) drive these; rig.py runs them.

Every wait polls for an event with a deadline; no step sleeps for a fixed time.
"""
import json
import os
import grp
import pwd
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

from agent import lines_of

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER_IP = "10.197.0.1"
GUEST_IP = "10.197.0.2"
BRIDGE = "nlkbr0"
TAP = "nlktap0"
# Scenarios 12 to 14: a second guest is the NFS server (the kernel's nfsd), its export on a
# disk of its own, nlockd or rpc.statd its status monitor.
NFSD_IP = "10.197.0.3"
NFSD_NAME = "nlk-nfsd"
NFSD_TAP = "nlktap1"
NFSD_EXPORT = "/run/nlk-export"
NFSD_DISK_BYTES = 64 << 20
ADMIN = "127.0.0.1:9464"
# Scenarios 5 and 11: nlockd --serve nsm, Ganesha's status monitor, serves its admin API here.
STATUS_ADMIN = "127.0.0.1:9465"
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
# The server sides a scenario runs on (scenarios.SIDE): the rig's usual one (Ganesha without its
# NLM, the full nlockd), or Ganesha's own NLM with nlockd --serve nsm as its status monitor.
USUAL = "nlockd"
GANESHA_NLM = "ganesha-nlm"


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

    def json(self, path, wait=10):
        # nlockd opens its admin port once it serves, just after its rpcbind registration (the
        # agent's "ready"): a port not answering yet is waited for, briefly.
        deadline = time.monotonic() + wait
        status, body = self.get(path)
        while status is None and time.monotonic() < deadline:
            time.sleep(0.1)
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
                # When the host had it: the guest's clock is its own.
                msg["host_time"] = now()
                if "id" in msg:
                    self.replies[msg["id"]] = msg
                else:
                    self.events.append(msg)
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def _wait(self, what, pick, timeout, expire=True):
        """Waits for pick() to return something other than None; past the timeout, raises
        Failure, or returns None if not expire."""
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
                if left <= 0 and not expire:
                    return None
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

    def first_reply(self, req_ids, timeout, what):
        """Whichever of the requests is answered first: (id, reply), or None if none is within
        the timeout (the others stay pending)."""
        def pick():
            return next(((i, self.replies.pop(i)) for i in req_ids if i in self.replies), None)
        return self._wait(what, pick, timeout, expire=False)

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

    def kill(self):
        """SIGKILL: a pending request of this worker is never answered."""
        r = self.agent.reply(self.agent.send(op="kill", worker=self.name), 30,
                             "the end of worker %s" % self.name)
        if not r["ok"]:
            raise Failure("%s: no such worker to kill" % self.name)
        return r

    def close(self, path):
        r = self.call("close", file=path)
        if not r["ok"]:
            raise Failure("%s: close %s: %s" % (self.name, path, r["error"]))


def make_statd_dir(path):
    """What nfs-common lays out in /var/lib/nfs; rpc.statd runs as the owner of sm/."""
    statd_uid = pwd.getpwnam("statd").pw_uid
    nogroup = grp.getgrnam("nogroup").gr_gid
    os.makedirs(path, 0o755)
    for d in ("sm", "sm.bak"):
        os.mkdir(os.path.join(path, d), 0o755)
        os.chown(os.path.join(path, d), statd_uid, nogroup)
    open(os.path.join(path, "state"), "w").close()
    os.chown(os.path.join(path, "state"), statd_uid, 0)


class Guest:
    """A Debian kernel under QEMU on the rig's bridge: the rig's NFS client (always), or the
    kernel NFS server of scenarios 12 to 14 (role "nfsd": a disk with the export, nfsd started at
    boot). Its persistent state directory (its /var/lib/nfs) outlives a power-off as a disk
    would."""

    def __init__(self, rig, role, ip, hostname, tap, mac, initrd, disk=None):
        self.rig = rig
        self.role = role
        self.ip = ip
        self.hostname = hostname
        self.tap = tap
        self.mac = mac
        self.initrd = initrd
        self.disk = disk
        # The client's files keep the names they always had; the server's carry its role.
        self.prefix = "" if role == "client" else role + "-"
        self.state = rig.path("guest-state" if role == "client" else role + "-state")
        self.qemu = self.agent = self.ready = None
        self.boots = 0
        self.nlockd_statd = False
        self.mounted = set()
        self.console = None
        # A kernel NFS server booted, whose grace period no scenario has waited out yet.
        self.in_grace = False

    def boot(self, nlockd_statd=False):
        """Starts QEMU; returns at once. wait_ready() waits for the agent. nlockd_statd: the
        guest runs nlockd --serve nsm in place of rpc.statd and sm-notify."""
        rig = self.rig
        self.boots += 1
        self.nlockd_statd = nlockd_statd
        if not os.path.isdir(self.state):
            make_statd_dir(self.state)
        name = lambda what: rig.path("%s%s-%d" % (self.prefix, what, self.boots))
        sock = name("agent") + ".sock"
        self.console = name("console") + ".log"
        append = [
            # Under emulation the TSC calibrates wrongly: keep time by the HPET.
            "console=ttyS0", "panic=-1", "tsc=unstable",
            "nlk.init=" + os.path.join(HERE, "guest-init.sh"),
            "nlk.ip=%s/24" % self.ip, "nlk.hostname=" + self.hostname,
            "nlk.agent=" + os.path.join(HERE, "agent.py")]
        if nlockd_statd:
            append.append("nlk.statd=" + rig.args.guest_nlockd)
            # A measurement, not a test: the guest nlockd's start traced (docs/kernel-rig.md).
            if os.environ.get("NLOCKD_KERNEL_GUEST_TRACE"):
                append.append("nlk.trace=1")
        disk = []
        if self.disk:
            # The export's file system, the server's disk: nfsd starts at boot.
            append.append("nlk.nfsd=/dev/vda")
            disk = ["-drive", "file=%s,format=raw,if=virtio" % self.disk]
        argv = [
            "qemu-system-x86_64", "-nodefaults", "-no-user-config", "-display", "none",
            "-no-reboot", "-accel", "tcg", "-m", "512", "-smp", "1",
            "-kernel", rig.args.kernel, "-initrd", self.initrd, "-append", " ".join(append),
            "-serial", "file:" + self.console,
            "-netdev", "tap,id=net0,ifname=%s,script=no,downscript=no" % self.tap,
            "-device", "virtio-net-pci,netdev=net0,mac=" + self.mac,
            "-fsdev", "local,id=hostroot,path=/,security_model=passthrough,readonly=on,"
            "multidevs=remap",
            "-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
            "-fsdev", "local,id=nfsstate,path=%s,security_model=passthrough,multidevs=remap" %
            self.state,
            "-device", "virtio-9p-pci,fsdev=nfsstate,mount_tag=nfsstate",
            "-device", "virtio-rng-pci",
            "-device", "virtio-serial-pci",
            "-chardev", "socket,id=agent,path=%s,server=on,wait=off" % sock,
            "-device", "virtserialport,chardev=agent,name=nlk.agent",
        ] + disk
        self.qemu_log = open(name("qemu") + ".log", "wb")
        self.boot_started = now()
        self.ready = None
        self.qemu = subprocess.Popen(argv, stdout=self.qemu_log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        self.agent = AgentLink(sock, self.qemu)
        self.mounted = set()

    def label(self):
        return "%sboot %d" % (self.prefix.replace("-", " "), self.boots)

    def running(self):
        return self.qemu is not None and self.qemu.poll() is None

    def wait_ready(self):
        """Seconds from QEMU's start to the agent's word that the status monitor is up."""
        self.ready = self.agent.event("ready", BOOT_DEADLINE)
        self.rig.notes.append("%s: agent ready at guest uptime %.1f s" %
                              (self.label(), self.ready["uptime"]))
        return self.ready["host_time"] - self.boot_started

    def host_time(self, uptime):
        """The host's clock (now()) at the guest's uptime, paired by the agent's ready event
        (to a few ms: the serial port's delivery, and /proc/uptime's 10 ms)."""
        return uptime + self.ready["host_time"] - self.ready["uptime"]

    def console_times(self, source, pattern, since=None):
        """Host times of this boot's console lines from `source` (statd, sm-notify, nlockd,
        guest-init) matching pattern, each stamped with the guest's uptime; since: a host
        time, earlier lines left out."""
        times = []
        line_re = re.compile(r"^%s: (?:at )?\[?([0-9.]+)\]?(?: s:)? (.*)$" % re.escape(source))
        with open(self.console, errors="replace") as f:
            for line in f:
                m = line_re.match(line.rstrip())
                if m and re.search(pattern, m.group(2)):
                    t = self.host_time(float(m.group(1)))
                    if since is None or t >= since:
                        times.append(t)
        return times

    def power_off(self):
        """Pulls the plug: no shutdown, no unmount, nothing reaches the server."""
        if self.running():
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
            self.rig.notes.append("%s: QEMU used %.1f s of CPU in %.1f s" %
                                  (self.label(), cpu, now() - self.boot_started))
        except (OSError, IndexError, ValueError):
            pass

    def mount(self, name, opts, sharecache, server, export):
        """Mounts server:export at MNT/NAME in the guest (once per boot)."""
        point = "%s/%s" % (GUEST_MNT, name)
        if name in self.mounted:
            return point
        if not sharecache:
            opts += ",nosharecache"
        t0 = now()
        self.agent.sh("mkdir -p %s && mount -t nfs -o %s %s:%s %s" %
                      (point, opts, server, export, point), timeout=120)
        self.rig.notes.append("mount %s (%s) %.2f s" % (name, opts, now() - t0))
        self.mounted.add(name)
        return point

    def mount_pair(self, label, opts, server, export):
        """Two mounts of the export, the second with nosharecache, so that two processes of
        the guest contend at the server rather than inside the guest's kernel."""
        return (self.mount(label + "1", opts, True, server, export),
                self.mount(label + "2", opts, False, server, export))

    def unmount(self, label):
        """Forgets the mounts of `label` (lazily: their server may be gone)."""
        for name in sorted(self.mounted):
            if name.startswith(label) and name[len(label):].isdigit():
                self.agent.sh("umount -f -l %s/%s" % (GUEST_MNT, name), check=False)
                self.mounted.discard(name)


class Rig:
    def __init__(self, args):
        self.args = args
        self.work = args.work
        self.admin = Admin()
        self.rpcbind = self.ganesha = self.nlockd = self.status_monitor = self.statd = None
        self.export = os.path.join(self.work, "export")
        self.notes = []
        self.client = Guest(self, "client", GUEST_IP, GUEST_NAME, TAP, "52:54:00:c1:a0:02",
                            args.initrd)
        self.server = None
        # What scenarios measured, for comparisons across them (scenarios 12 to 14).
        self.measured = {}

    # --- server side ---------------------------------------------------------------------

    def start_server_side(self):
        # A bridge holds the server side's address; each guest's tap is a port of it, so that
        # the guests reach each other too (scenarios 12 to 14).
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
        run(["ip", "addr", "add", SERVER_IP + "/24", "dev", BRIDGE])
        run(["ip", "link", "set", BRIDGE, "up"])
        run(["ip", "tuntap", "add", "dev", TAP, "mode", "tap"])
        run(["ip", "link", "set", TAP, "master", BRIDGE])
        run(["ip", "link", "set", TAP, "up"])
        self.rpcbind = Process("rpcbind", ["rpcbind", "-f"], self.path("rpcbind.log"))
        wait_for("rpcbind", lambda: self.rpcbind.check_alive() or
                 run(["rpcinfo", "-p", "127.0.0.1"], check=False).returncode == 0, 30)
        self.start_ganesha()
        self.start_nlockd()

    def path(self, name):
        return os.path.join(self.work, name)

    def start_ganesha(self, nlm=False):
        """Ganesha serving MOUNT and NFSv3; with nlm, its own NLM too (scenarios 5 and 11), which
        monitors client hosts through the status monitor that the local rpcbind names."""
        os.makedirs(self.export, exist_ok=True)
        os.chmod(self.export, 0o777)
        conf = self.path("ganesha-nlm.conf" if nlm else "ganesha.conf")
        with open(conf, "w") as f:
            f.write(GANESHA_CONF % {"export": self.export, "nlm": "true" if nlm else "false",
                                    "recovery": self.path("ganesha-recovery"),
                                    "components": GANESHA_NLM_LOG if nlm else ""})
        self.ganesha = Process("ganesha", [
            "ganesha.nfsd", "-F", "-f", conf, "-L", self.path("ganesha.log"),
            "-p", self.path("ganesha.pid")], self.path("ganesha.out"))
        # Ganesha is serving once MOUNT and NFSv3 are registered on both transports.
        wait_for("Ganesha's rpcbind registrations", lambda: self.ganesha.check_alive() or all(
            rpcinfo_has(p, v, t) for p, v in ((100003, 3), (100005, 3)) for t in ("tcp", "udp")),
            60)
        if nlm:
            wait_for("Ganesha's NLM registrations", lambda: self.ganesha.check_alive() or all(
                rpcinfo_has(100021, 4, t) for t in ("tcp", "udp")), 30)
        elif rpcinfo_has(100021, 4, "tcp"):
            raise Failure("Ganesha registered NLM although its config turns it off")

    def stop_checked(self, process):
        """SIGTERM; a non-zero exit (a sanitizer's report at exit) is a failure."""
        status = process.stop()
        if status != 0:
            raise Failure("%s exited with %s on SIGTERM; its log ends:\n%s" % (
                process.name, status, tail(process.log_path, 60, r"admin: (GET|HEAD) ")))

    def unregistered(self, program):
        """Waits until no process holds a mapping of program in the namespace's rpcbind."""
        wait_for("program %d to leave rpcbind" % program, lambda: not any(
            rpcinfo_has(program, v, t) for v in (1, 3, 4) for t in ("tcp", "udp")), 10)

    def serve(self, side):
        """Puts the server side `side` in place, unless it is there already."""
        if side == GANESHA_NLM:
            if self.status_monitor is None:
                self.serve_ganesha_nlm()
        else:
            self.serve_nlockd_nlm()

    def serve_ganesha_nlm(self):
        """The server side of scenarios 5 and 11: Ganesha's own NLM, and nlockd --serve nsm
        (its own store and admin port) as the host's status monitor in place of rpc.statd. The
        status monitor comes first, registered with rpcbind, so that Ganesha's SM_UNMON_ALL at
        its start reaches it."""
        self.stop_checked(self.nlockd)
        self.ganesha.stop()
        self.unregistered(100021)
        self.unregistered(100024)
        self.status_monitor = Process("nlockd-nsm", [
            self.args.nlockd, "--serve", "nsm", "--listen", "0.0.0.0:0", "--name", SERVER_IP,
            "--store", "sqlite:" + self.path("nlockd-nsm.db"), "--admin-listen", STATUS_ADMIN,
            "--log-level", "debug"], self.path("nlockd-nsm.log"))
        status = Admin(STATUS_ADMIN)
        wait_for("nlockd --serve nsm ready and registered",
                 lambda: self.status_monitor.check_alive() or (
                     status.ready() and rpcinfo_has(100024, 1, "tcp") and
                     rpcinfo_has(100024, 1, "udp")), 30)
        if rpcinfo_has(100021, 4, "tcp"):
            raise Failure("nlockd --serve nsm registered NLM")
        self.start_ganesha(nlm=True)
        return status

    def serve_nlm_beside_statd(self):
        """Scenario 8's server side: Debian's rpc.statd as the host's status monitor (its own
        state directory in the work directory) and nlockd --serve nlm, which monitors client
        hosts through it."""
        self.stop_checked(self.nlockd)
        self.unregistered(100021)
        self.unregistered(100024)
        state = self.path("server-statd")
        # rpc.statd runs as the owner of sm/ (user statd), which must reach it: mktemp made
        # the work directory 0700.
        os.chmod(self.work, 0o711)
        if not os.path.isdir(state):
            make_statd_dir(state)
        self.statd = Process("rpc.statd", [
            "rpc.statd", "-F", "-d", "--no-notify", "-P", state, "-n", SERVER_IP],
            self.path("server-statd.log"))
        wait_for("rpc.statd registered", lambda: self.statd.check_alive() or (
            rpcinfo_has(100024, 1, "tcp") and rpcinfo_has(100024, 1, "udp")), 30)
        self.start_nlockd(serve="nlm")

    def serve_nlockd_nlm(self):
        """Back to the rig's usual server side: Ganesha without NLM, the full nlockd."""
        failure = None
        if self.statd is not None:
            try:
                self.stop_checked(self.nlockd)
            except Failure as e:
                failure = e
            self.statd.stop()
            self.statd = None
            self.unregistered(100021)
            self.unregistered(100024)
        if self.status_monitor is not None:
            self.ganesha.stop()
            try:
                self.stop_checked(self.status_monitor)
            except Failure as e:
                failure = e
            self.status_monitor = None
            self.unregistered(100021)
            self.unregistered(100024)
            self.start_ganesha()
        if not self.nlockd.alive():
            self.start_nlockd()
        if failure:
            raise failure

    def start_nlockd(self, serve="nlm,nsm"):
        """The server's nlockd; serve = "nlm" (scenario 8) has a store and log of its own."""
        suffix = "" if serve == "nlm,nsm" else "-" + serve
        self.nlockd = Process("nlockd" + suffix, [
            self.args.nlockd, "--serve", serve, "--listen", "0.0.0.0:%d" % NLOCKD_PORT,
            "--name", SERVER_IP, "--store", "sqlite:" + self.path("nlockd%s.db" % suffix),
            "--admin-listen", ADMIN, "--log-level", "debug"],
            self.path("nlockd%s.log" % suffix))
        wait_for("nlockd ready and registered", lambda: self.nlockd.check_alive() or (
            self.admin.ready() and rpcinfo_has(100021, 4, "tcp") and
            rpcinfo_has(100021, 4, "udp")), 30)

    # --- the guests ----------------------------------------------------------------------

    # The rig's guest is the NFS client of every scenario; these are its state, for the
    # scenarios that drive it directly.
    qemu = property(lambda self: self.client.qemu)
    agent = property(lambda self: self.client.agent)
    boots = property(lambda self: self.client.boots)
    console = property(lambda self: self.client.console)
    nlockd_statd = property(lambda self: self.client.nlockd_statd)
    mounted = property(lambda self: self.client.mounted)

    def boot(self, nlockd_statd=False):
        self.client.boot(nlockd_statd)

    def wait_ready(self):
        return self.client.wait_ready()

    def power_off(self):
        self.client.power_off()

    def mount(self, name, opts, sharecache=True, server=SERVER_IP, export=None):
        return self.client.mount(name, opts, sharecache, server, export or self.export)

    def mount_pair(self, label="tcp", opts=DEFAULT_OPTS, server=SERVER_IP, export=None):
        return self.client.mount_pair(label, opts, server, export or self.export)

    def nfsd_guest(self):
        """The second guest, the kernel NFS server of scenarios 12 to 14 (created, not booted)."""
        if self.server is None:
            disk = self.path("nfsd-export.img")
            if not os.path.exists(disk):
                with open(disk, "wb") as f:
                    f.truncate(NFSD_DISK_BYTES)
                run(["mkfs.ext4", "-q", "-F", "-L", "nlk-export", disk])
            self.server = Guest(self, "nfsd", NFSD_IP, NFSD_NAME, NFSD_TAP, "52:54:00:c1:a0:03",
                                self.args.initrd_nfsd, disk)
            # The server guest's tap joins the bridge only now: most runs never boot it.
            run(["ip", "tuntap", "add", "dev", NFSD_TAP, "mode", "tap"])
            run(["ip", "link", "set", NFSD_TAP, "master", BRIDGE])
            run(["ip", "link", "set", NFSD_TAP, "up"])
        return self.server

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

    def stop_server_guest(self):
        """After the last scenario on the kernel NFS server: the client forgets its mounts, and
        the server guest is switched off."""
        if self.server is not None and self.server.running():
            if self.client.running():
                try:
                    self.client.unmount("nfsd")
                except Failure as e:
                    print("kernel: the client does not unmount the kernel server: %s" % e,
                          flush=True)
            self.server.power_off()

    def stop(self):
        self.power_off()
        if self.server is not None:
            self.server.power_off()
        for p in (self.nlockd, self.status_monitor, self.statd, self.ganesha, self.rpcbind):
            if p and not p.log.closed:
                p.stop()

    def logs(self):
        out = []
        if self.boots:
            out.append("--- guest console (boot %d) ---\n%s" % (self.boots, tail(self.console, 60)))
        if self.server is not None and self.server.boots:
            out.append("--- server guest console (nfsd boot %d) ---\n%s" %
                       (self.server.boots, tail(self.server.console, 60)))
        out.append("--- nlockd.log ---\n%s" %
                   tail(self.path("nlockd.log"), 40, r"admin: (GET|HEAD) "))
        if os.path.exists(self.path("nlockd-nsm.log")):
            out.append("--- nlockd-nsm.log ---\n%s" %
                       tail(self.path("nlockd-nsm.log"), 40, r"admin: (GET|HEAD) "))
        out.append("--- ganesha.log ---\n%s" % tail(self.path("ganesha.log"), 15))
        return "\n".join(out)


GANESHA_CONF = """\
# NFSv3 only. Without Ganesha's own NLM (Enable_NLM = false), clients find nlockd's nlockmgr
# through rpcbind; with it (scenarios 5 and 11), Ganesha is the lock manager and monitors clients
# through the status monitor registered with rpcbind.
NFS_CORE_PARAM {
    Protocols = 3;
    Enable_NLM = %(nlm)s;
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
%(components)s}
"""
# With its NLM on, Ganesha logs each NLM request's result ("REQUEST RESULT: nlm4_Lock
# NLM4_BLOCKED"): the only sign, seen from outside, that a blocking LOCK waits there.
GANESHA_NLM_LOG = """\
    COMPONENTS {
        NLM = DEBUG;
    }
"""
