# SPDX-License-Identifier: Apache-2.0
"""Scenarios 12 to 14 of the kernel client rig (docs/kernel-rig.md): the Linux kernel's own NFS
server. A second guest runs nfsd, with its lockd, and a status monitor; the rig's guest is its
client, with lockd and the same kind of status monitor. Each scenario runs with nlockd --serve
nsm on both guests (12, 13, 14) and with Debian's rpc.statd and sm-notify on both (12s, 13s,
14s), the reference whose timings nlockd's are set against.
"""
import os
import re
import shlex
import shutil

from host import (BOOT_DEADLINE, CALLBACK_DEADLINE, DEFAULT_OPTS, GUEST_IP, NFSD_EXPORT, NFSD_IP,
                  Admin, Failure, Worker, now, wait_for)

NLOCKD = "nlockd"
STATD = "rpc.statd"
# guest-init.sh gives nfsd's and lockd's grace periods this many seconds at the server's boot.
GRACE = 10
# The kernel's lockd retries a request refused for the server's grace period every 5 s.
GRACE_RETRY = 5
# What each status monitor logs (on the guest's console, stamped with the guest's uptime) when a
# peer's restart notification reaches it, and when its kernel's lockd monitors a host.
NOTIFIED = {NLOCKD: (NLOCKD, r"nsm host \S+ rebooted"),
            STATD: ("statd", r"Received SM_NOTIFY")}
MONITORS = {NLOCKD: (NLOCKD, r"nsm monitoring\"? mon_name=%s " % re.escape(GUEST_IP)),
            STATD: ("statd", r"Received SM_MON for %s " % re.escape(GUEST_IP))}
# When a booting guest's notification round begins: nlockd's own word, or the start of sm-notify.
SENDS = {NLOCKD: (NLOCKD, r"nsm notifying \d+ hosts"),
         STATD: ("guest-init", r"sm-notify started")}
TOOLS = ("rpc.nfsd", "rpc.mountd", "exportfs", "mkfs.ext4")


def prepare(rig, mode, client=True):
    """Both guests up with `mode` as their status monitor: the server guest booted if it is not
    running so, the client booted again if it runs the other one (both boots at once). With
    client False, the client keeps the status monitor it has (booted with nlockd if it is off)."""
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        raise Failure("%s missing: the server guest runs the host's nfs-kernel-server and "
                      "e2fsprogs (scripts/install-deps.sh --test)" % " ".join(missing))
    want = mode == NLOCKD
    server = rig.nfsd_guest()
    booting = []
    if not server.running() or server.nlockd_statd != want:
        server.power_off()
        server.boot(nlockd_statd=want)
        booting.append(("server", server))
    if not rig.client.running() or (client and rig.nlockd_statd != want):
        rig.power_off()
        rig.boot(nlockd_statd=want if client else True)
        booting.append(("client", rig.client))
    booted = ["%s booted in %.1f s" % (who, guest.wait_ready()) for who, guest in booting]
    server.in_grace = any(guest is server for _, guest in booting)
    return server, booted


def after_grace(server, booted):
    """A server that just started refuses new locks for its grace period (the client's kernel
    would retry every 5 s): a scenario mounts in the meantime, then waits for its end."""
    if server.in_grace:
        t0 = now()
        wait_for("the server's grace period to end", lambda: grace_over(server), GRACE + 30,
                 interval=0.5)
        booted.append("its grace over %.1f s after the mounts" % (now() - t0))
        server.in_grace = False


def grace_over(server):
    """nfsd's word that its grace period ended; lockd's, as long and started just before it, has
    ended too."""
    return server.agent.sh("cat /proc/fs/nfsd/v4_end_grace")["out"].strip() == "Y"


def server_locks(server, path):
    """The POSIX locks on the server's file `path` in its kernel's /proc/locks: (held, waiting).
    lockd's locks for its clients are there as a local process's would be."""
    r = server.agent.sh("stat -c %%i %s && cat /proc/locks" % shlex.quote(path))
    lines = r["out"].splitlines()
    inode = lines[0].strip()
    held = waiting = 0
    for line in lines[1:]:
        # "1: POSIX  ADVISORY  WRITE 321 fd:00:12 0 EOF"; a waiter has "->" after the number.
        fields = line.split()
        waiter = len(fields) > 1 and fields[1] == "->"
        if waiter:
            fields = fields[:1] + fields[2:]
        if len(fields) >= 6 and fields[1] == "POSIX" and fields[5].split(":")[-1] == inode:
            if waiter:
                waiting += 1
            else:
                held += 1
    return held, waiting


def monitored(guest, mode, peer):
    """Whether the guest's status monitor holds its kernel's SM_MON of `peer`."""
    if mode == STATD:
        return os.path.exists(os.path.join(guest.state, "sm", peer))
    clients = Admin(guest.ip + ":9464").json("/api/v1/clients?mon_name=%s" % peer)["clients"]
    return any(c["my_prog"] == 100021 and c["my_proc"] == 16 and c["my_name"] == guest.hostname
               for c in clients)


def state_number(guest, mode):
    if mode == NLOCKD:
        return Admin(guest.ip + ":9464").json("/api/v1/status")["state_number"]
    return int(guest.agent.sh("od -An -t d4 /var/lib/nfs/state")["out"].split()[0])


def first(times, what):
    if not times:
        raise Failure("no console line shows %s" % what)
    return times[0]


def kernel_lines(guest, pattern):
    """The lines of the guest's console (this boot) that match: the kernel's messages."""
    with open(guest.console, errors="replace") as f:
        return [line.strip() for line in f if re.search(pattern, line)]


def files(rig, tag):
    m1, m2 = rig.mount_pair("nfsd", DEFAULT_OPTS, NFSD_IP, NFSD_EXPORT)
    return "%s/%s" % (m1, tag), "%s/%s" % (m2, tag), "%s/%s" % (NFSD_EXPORT, tag)


def compare(rig, key, mode, values):
    """Keeps a scenario's timings; once both status monitors ran it, a note sets them side by
    side (values: [(what, seconds)])."""
    rig.measured[(key, mode)] = values
    other = rig.measured.get((key, STATD if mode == NLOCKD else NLOCKD))
    if other is None:
        return
    mine = dict(values)
    by_mode = {mode: mine, (STATD if mode == NLOCKD else NLOCKD): dict(other)}
    for what, _ in values:
        if what in by_mode[NLOCKD] and what in by_mode[STATD]:
            rig.notes.append("scenario %s, %s: nlockd %.2f s, rpc.statd %.2f s" % (
                key, what, by_mode[NLOCKD][what], by_mode[STATD][what]))


def scenario_locks(rig, mode):
    """Locks through the kernel's lockd on both sides: the client's lockd asks the server's,
    both status monitors get their kernel's SM_MON, a second owner of the client is refused, and
    a blocked F_SETLKW is granted by the server kernel's GRANTED callback after the unlock."""
    server, booted = prepare(rig, mode)
    tag = "k12" + ("s" if mode == STATD else "")
    f1, f2, local = files(rig, tag)
    after_grace(server, booted)
    a, b = Worker(rig.agent, tag + "-a"), Worker(rig.agent, tag + "-b")
    a.open(f1)
    b.open(f2)
    r = a.must_lock(f1, "w")
    first_ms = (r["t1"] - r["t0"]) * 1000
    if server_locks(server, local) != (1, 0):
        raise Failure("the server's kernel does not hold the client's one lock: %s" %
                      (server_locks(server, local),))
    # Each kernel's lockd monitors its peer through its own status monitor.
    if not monitored(rig.client, mode, NFSD_IP):
        raise Failure("the client's %s holds no SM_MON of the server %s" % (mode, NFSD_IP))
    if not monitored(server, mode, GUEST_IP):
        raise Failure("the server's %s holds no SM_MON of the client %s" % (mode, GUEST_IP))
    b.must_be_denied(f2, "w")
    b.must_be_denied(f2, "r")
    a.must_lock(f1, "u")
    r = a.must_lock(f1, "w")
    lock_ms = (r["t1"] - r["t0"]) * 1000
    pending = b.start("lock", file=f2, type="w", wait=True)
    wait_for("the server's lockd to queue the blocked lock",
             lambda: server_locks(server, local)[1] == 1, 30, interval=0.2)
    unlock = a.must_lock(f1, "u")
    granted = b.finish(pending, CALLBACK_DEADLINE, "the blocked lock's grant (GRANTED callback)")
    if not granted["ok"]:
        raise Failure("the blocked lock failed: %s" % granted["error"])
    grant_ms = (granted["t1"] - unlock["t0"]) * 1000
    if server_locks(server, local) != (1, 0):
        raise Failure("after the grant the server should hold the waiter's lock alone: %s" %
                      (server_locks(server, local),))
    b.must_lock(f2, "u")
    a.close(f1)
    b.close(f2)
    wait_for("the server's kernel to drop the locks",
             lambda: server_locks(server, local) == (0, 0), 10, interval=0.2)
    return ("%s; first lock (both SM_MON included) %.0f ms, lock %.0f ms, "
            "grant-after-unlock %.0f ms" % (", ".join(booted) or "no boot", first_ms, lock_ms,
                                            grant_ms))


def scenario_client_reboot(rig, mode):
    """The client loses power holding a lock; a process of the server waits for it in F_SETLKW.
    The client's new boot notifies through its status monitor; the server's status monitor
    calls its kernel's lockd (procedure 16), which drops the lock: the server's process gets it."""
    server, booted = prepare(rig, mode)
    want = mode == NLOCKD
    key = "13" + ("s" if mode == STATD else "")
    tag = "k" + key
    f1, _, local = files(rig, tag)
    after_grace(server, booted)
    a = Worker(rig.agent, tag + "-a")
    a.open(f1)
    a.must_lock(f1, "w")
    s = Worker(server.agent, tag + "-s")
    s.open(local)
    s.must_be_denied(local, "w")
    pending = s.start("lock", file=local, type="w", wait=True)
    wait_for("the server's process to wait behind the client's lock",
             lambda: server_locks(server, local) == (1, 1), 30, interval=0.2)
    state_before = state_number(rig.client, mode)
    status = Admin(server.ip + ":9464")
    if mode == NLOCKD:
        crashes = status.metric("nsm_crashes_detected_total") or 0
        callbacks = status.metric("nlm_callbacks_total", kind="status", result="ok") or 0
    t0 = now()
    released = reboot_client_until_released(rig, server, pending, want)
    boot_s = rig.wait_ready()
    state_after = state_number(rig.client, mode)
    if state_after <= state_before:
        raise Failure("the client's NSM state did not advance across the reboot (%d -> %d)" %
                      (state_before, state_after))
    started = first(rig.client.console_times("guest-init", r"^rpcbind up"),
                    "the client's status monitor starting")
    source, pattern = SENDS[mode]
    sent = first(rig.client.console_times(source, pattern),
                 "the client's notification round beginning")
    source, pattern = NOTIFIED[mode]
    heard = first(server.console_times(source, pattern, since=t0),
                  "the client's notification reaching the server's %s" % mode)
    if mode == NLOCKD:
        if not (status.metric("nsm_crashes_detected_total") or 0) > crashes:
            raise Failure("the server's nlockd released the lock without counting the reboot")
        if not (status.metric("nlm_callbacks_total", kind="status", result="ok") or 0) > \
                callbacks:
            raise Failure("the server's nlockd counted no status callback to its kernel")
    # The new boot takes the lock once the server's process lets it go.
    s.must_lock(local, "u")
    s.close(local)
    f1, _, _ = files(rig, tag)
    c = Worker(rig.agent, tag + "-c")
    c.open(f1)
    c.must_lock(f1, "w")
    c.close(f1)
    wait_for("the server's kernel to drop the locks",
             lambda: server_locks(server, local) == (0, 0), 10, interval=0.2)
    timings = [("reboot to release", released - t0),
               ("status monitor start to release", released - started),
               ("notification round start to release", released - sent),
               ("notification received to release", released - heard)]
    compare(rig, "13", mode, timings)
    return ("%sclient boot %.1f s, reboot-to-release %.1f s; from the client's %s starting "
            "%.2f s, from its notification round beginning %.2f s, from the notification's "
            "arrival at the server's %s %.0f ms; client NSM state %d -> %d" % (
                "".join(b + "; " for b in booted), boot_s, released - t0, mode,
                released - started, released - sent, mode, (released - heard) * 1000,
                state_before, state_after))


def reboot_client_until_released(rig, server, pending, nlockd_statd):
    """Cuts the client's power and boots it again while a process of the server waits in
    F_SETLKW (`pending`) behind the client's lock; returns the host time at which the server's
    kernel let the waiting process have it (the client's reboot reached its lockd)."""
    rig.power_off()
    t0 = now()
    rig.boot(nlockd_statd=nlockd_statd)
    while True:
        got = server.agent.first_reply([pending], 0.5, "the server's F_SETLKW")
        if got is not None:
            break
        if not rig.client.running():
            raise Failure("the client's QEMU exited (%s) during its boot" %
                          rig.client.qemu.returncode)
        ready = rig.agent.has_event("ready")
        if ready and now() > ready["host_time"] + 60:
            raise Failure("the server still holds the lock a minute after the client came back")
        if now() > t0 + BOOT_DEADLINE:
            raise Failure("the server still holds the lock %.0f s after the client's power-off" %
                          BOOT_DEADLINE)
    reply = got[1]
    if not reply["ok"]:
        raise Failure("the server's F_SETLKW failed: %s" % reply["error"])
    return reply["host_time"]


def scenario_server_reboot(rig, mode):
    """The server loses power while the client holds a lock. The server's new boot notifies
    through its status monitor; the client's calls its kernel's lockd (procedure 16), which
    reclaims during the server's grace period; the lock is held again (another process of the
    client is refused) and the grace period ends (a new lock is granted). The grace period is
    the server kernel's own (nfsd's and lockd's); the status monitor only notifies."""
    server, booted = prepare(rig, mode)
    want = mode == NLOCKD
    key = "14" + ("s" if mode == STATD else "")
    tag = "k" + key
    f1, f2, local = files(rig, tag)
    after_grace(server, booted)
    fresh = os.path.dirname(f2) + "/" + tag + "-new"
    a, b, c = (Worker(rig.agent, "%s-%s" % (tag, n)) for n in "abc")
    a.open(f1)
    b.open(f2)
    c.open(fresh)
    a.must_lock(f1, "w")
    if server_locks(server, local) != (1, 0):
        raise Failure("the server's kernel does not hold the client's lock: %s" %
                      (server_locks(server, local),))
    b.must_be_denied(f2, "w")
    # The client's kernel says when it gives a lock up (its reclaim refused or failed).
    lost = r"lockd: failed to reclaim"
    lost_before = len(kernel_lines(rig.client, lost))
    server.power_off()
    t0 = now()
    server.boot(nlockd_statd=want)
    boot_s = server.wait_ready()

    def reclaimed():
        gave_up = kernel_lines(rig.client, lost)[lost_before:]
        if gave_up:
            raise Failure("the client's kernel gave its lock up: %s" % gave_up)
        return server_locks(server, local)[0] == 1 and now()

    seen = wait_for("the client's reclaim to reach the server", reclaimed, 60, interval=0.2)
    # The server's lockd monitors the client again at its first request of the new boot, the
    # reclaim.
    source, pattern = MONITORS[mode]
    reclaim = first(server.console_times(source, pattern, since=t0),
                    "the server's %s monitoring the client again" % mode)
    nfsd = first(server.console_times("guest-init", r"^nfsd started"), "nfsd starting")
    source, pattern = SENDS[mode]
    sent_at = first(server.console_times(source, pattern),
                    "the server's notification round beginning")
    source, pattern = NOTIFIED[mode]
    heard = first(rig.client.console_times(source, pattern, since=t0),
                  "the server's notification reaching the client's %s" % mode)
    # During or after the grace: another owner's conflicting lock, and a new lock, both held
    # back by the server while it is in grace (the kernel retries them every 5 s).
    sent = now()
    conflicting = b.start("lock", file=f2, type="w")
    new = c.start("lock", file=fresh, type="w")
    limit = GRACE + 2 * GRACE_RETRY + CALLBACK_DEADLINE
    rn = c.finish(new, limit, "a new lock after the server's grace")
    if not rn["ok"]:
        raise Failure("a new lock after the server's grace failed: %s" % rn["error"])
    rb = b.finish(conflicting, limit, "a conflicting lock after the server's grace")
    if rb["ok"]:
        raise Failure("another owner got the lock the client reclaimed")
    if rb["errno"] not in (11, 13):
        raise Failure("the conflicting lock failed instead of being refused: %s" % rb["error"])
    grace = re.findall(r"NFSD: starting (\d+)-second grace period",
                       "\n".join(kernel_lines(server, r"grace period")))
    a.must_lock(f1, "u")
    for w, path in ((a, f1), (b, f2), (c, fresh)):
        w.close(path)
    wait_for("the server's kernel to drop the locks",
             lambda: server_locks(server, local) == (0, 0), 10, interval=0.2)
    timings = [("reboot to reclaim", reclaim - t0), ("nfsd start to reclaim", reclaim - nfsd),
               ("notification round start to reclaim", reclaim - sent_at),
               ("notification received to reclaim", reclaim - heard)]
    compare(rig, "14", mode, timings)
    return ("%sserver boot %.1f s, reboot-to-reclaim %.1f s (the reclaim seen in /proc/locks "
            "at %.1f s); to the reclaim from nfsd starting %.2f s, from the server's "
            "notification round beginning %.2f s, from the notification's arrival at the "
            "client's %s %.0f ms; nfsd's grace %s s: a new lock asked %.1f s after nfsd started "
            "was granted after %.1f s, the conflicting one refused after %.1f s" % (
                "".join(b + "; " for b in booted), boot_s, reclaim - t0, seen - t0,
                reclaim - nfsd, reclaim - sent_at, mode, (reclaim - heard) * 1000,
                "/".join(grace) or "?", sent - nfsd, rn["host_time"] - sent,
                rb["host_time"] - sent))


# What installing nlockd-statd runs: nlockd with the package's configuration. The rig moves
# only its store (the package's /var/lib/nlockd-statd is on the guest's read-only root) and its
# admin server (to the guest's address, for the host's checks); statd's directory is the
# guest's /var/lib/nfs, as on Debian.
PACKAGE_CONF = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                             "..", "packaging", "statd", "nlockd-statd.toml"))


def stop_guest_daemon(guest, name):
    """SIGTERM to the guest's process `name`; returns once it is gone (the agent, PID 1, does not
    reap it: gone or a zombie)."""
    guest.agent.sh(
        "pid=$(pidof %s) && kill -TERM $pid && "
        "while [ -e /proc/$pid ] && [ \"$(cut -d' ' -f3 /proc/$pid/stat)\" != Z ]; do "
        "sleep 0.05; done" % shlex.quote(name), timeout=60)


def start_guest_daemon(guest, command, source):
    """Starts `command` in the background of the guest, its output on the console as `source`;
    returns once a status monitor answers on the guest's loopback (rpcinfo, as start-statd
    asks)."""
    line = "%s 2>&1 | /run/nlk-log %s" % (command, source)
    guest.agent.sh("(setsid sh -c %s </dev/null >/dev/null 2>&1 &)" % shlex.quote(line))
    wait_for("the status monitor to answer after the switch", lambda: guest.agent.sh(
        "rpcinfo -T udp 127.0.0.1 status 1", check=False)["rc"] == 0, 60, interval=0.2)


def hold_client_lock(rig, server, tag):
    """The client's process holds a write lock on the export's file `tag`, and a process of the
    server waits for it in F_SETLKW. Returns (server's worker, its pending request, path)."""
    f1, _, local = files(rig, tag)
    a = Worker(rig.agent, tag + "-a")
    a.open(f1)
    a.must_lock(f1, "w")
    s = Worker(server.agent, tag + "-s")
    s.open(local)
    pending = s.start("lock", file=local, type="w", wait=True)
    wait_for("the server's process to wait behind the client's lock",
             lambda: server_locks(server, local) == (1, 1), 30, interval=0.2)
    return s, pending, local


def kept_then_released(rig, server, held, client_nlockd, what):
    """After `what`: the client's lock and the server's waiter (`held`, from hold_client_lock)
    are still there; the client reboots, and the server's waiting process gets the lock. Returns
    the seconds from the power cut to the release."""
    s, pending, local = held
    if server_locks(server, local) != (1, 1):
        raise Failure("%s changed the server's locks: %s" % (what, server_locks(server, local)))
    t0 = now()
    released = reboot_client_until_released(rig, server, pending, client_nlockd)
    rig.wait_ready()
    s.must_lock(local, "u")
    s.close(local)
    return released - t0


def scenario_switch(rig):
    """Installing nlockd-statd on a running kernel NFS server, and removing it: rpc.statd is
    stopped and nlockd started with the package's configuration on the same boot (it takes
    statd's registrations and state number over from /var/lib/nfs and notifies nobody: the
    client keeps its lock); the client then reboots and the server's nlockd releases its lock
    through the server's lockd. Then nlockd stops (it writes sm/ and the state back) and
    rpc.statd starts again on them; the client reboots once more and statd releases its lock."""
    server, booted = prepare(rig, STATD, client=False)
    client_nlockd = rig.nlockd_statd
    after_grace(server, booted)
    # rpc.statd holds the server lockd's SM_MON of the client, from the client's first lock.
    s, pending, local = hold_client_lock(rig, server, "k15a")
    if not monitored(server, STATD, GUEST_IP):
        raise Failure("rpc.statd holds no SM_MON of the client before the switch")
    statd_state = state_number(server, STATD)

    t0 = now()
    stop_guest_daemon(server, STATD)
    start_guest_daemon(server, "%s --config %s --store sqlite:/var/lib/nfs/nlockd-statd.db "
                       "--admin-listen 0.0.0.0:9464 --admin-allow-unauthenticated-remote true "
                       "--log-level debug" % (shlex.quote(rig.args.guest_nlockd),
                                              shlex.quote(PACKAGE_CONF)), NLOCKD)
    switch_in = now() - t0
    if not monitored(server, NLOCKD, GUEST_IP):
        raise Failure("nlockd did not take rpc.statd's registration of the client over")
    if state_number(server, NLOCKD) != statd_state:
        raise Failure("nlockd did not keep rpc.statd's state %d on the same boot: %d" %
                      (statd_state, state_number(server, NLOCKD)))
    first(server.console_times(NLOCKD, r"nsm took over rpc.statd's files", since=t0),
          "nlockd taking rpc.statd's files over")
    # Nobody was told of a reboot: the client's lock and the server's waiter are still there.
    to_nlockd = kept_then_released(rig, server, (s, pending, local), client_nlockd,
                                   "the switch to nlockd")

    # The client's new boot locks again: the server's lockd monitors it through nlockd.
    s, pending, local = hold_client_lock(rig, server, "k15b")
    if not monitored(server, NLOCKD, GUEST_IP):
        raise Failure("nlockd holds no SM_MON of the client's new boot")
    nlockd_state = state_number(server, NLOCKD)
    t2 = now()
    stop_guest_daemon(server, os.path.basename(rig.args.guest_nlockd))
    start_guest_daemon(server, "rpc.statd --no-notify -F -d", "statd")
    switch_back = now() - t2
    server.nlockd_statd = False
    if not monitored(server, STATD, GUEST_IP):
        raise Failure("nlockd did not give the client's registration back in sm/")
    if state_number(server, STATD) != nlockd_state:
        raise Failure("the state file says %d after nlockd's %d" %
                      (state_number(server, STATD), nlockd_state))
    to_statd = kept_then_released(rig, server, (s, pending, local), client_nlockd,
                                  "the switch back")
    wait_for("the server's kernel to drop the locks",
             lambda: server_locks(server, local) == (0, 0), 10, interval=0.2)
    return ("%sswitch to nlockd %.1f s (registration and state %d kept, nobody notified), "
            "client reboot-to-release through it %.1f s; switch back %.1f s (sm/ and state %d "
            "given back), client reboot-to-release through rpc.statd %.1f s" % (
                "".join(b + "; " for b in booted), switch_in, statd_state, to_nlockd,
                switch_back, nlockd_state, to_statd))


SCENARIOS = {
    "12": ("the kernel's nfsd, nlockd as both status monitors: locks, conflicts, GRANTED",
           lambda rig: scenario_locks(rig, NLOCKD)),
    "13": ("the kernel's nfsd, nlockd as both status monitors: client reboot releases",
           lambda rig: scenario_client_reboot(rig, NLOCKD)),
    "14": ("the kernel's nfsd, nlockd as both status monitors: server reboot, client reclaims",
           lambda rig: scenario_server_reboot(rig, NLOCKD)),
    "15": ("the kernel's nfsd switched from rpc.statd to nlockd-statd and back, running: "
           "registrations and state kept, client reboots release",
           scenario_switch),
    "12s": ("scenario 12 with rpc.statd and sm-notify on both guests (reference)",
            lambda rig: scenario_locks(rig, STATD)),
    "13s": ("scenario 13 with rpc.statd and sm-notify on both guests (reference)",
            lambda rig: scenario_client_reboot(rig, STATD)),
    "14s": ("scenario 14 with rpc.statd and sm-notify on both guests (reference)",
            lambda rig: scenario_server_reboot(rig, STATD)),
}
