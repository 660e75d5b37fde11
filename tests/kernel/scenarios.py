# SPDX-License-Identifier: Apache-2.0
"""The kernel client rig's scenarios (docs/kernel-rig.md, "What it checks"). Each takes the Rig,
raises Failure, and returns a line of measurements."""
import errno
import os
import re
import shlex
import signal

import kernel_server
from host import (BOOT_DEADLINE, BRIDGE, CALLBACK_DEADLINE, DEFAULT_OPTS, GANESHA_NLM,
                  GUEST_ADMIN, GUEST_IP, GUEST_MNT, GUEST_NAME, SERVER_IP, STATUS_ADMIN, Admin,
                  Failure, Worker, now, run, wait_for)

# An address added to the server's interface while nlockd runs, as an HA move brings the
# service address to the node that takes over.
SERVICE_IP = "10.197.0.50"
# How long the reference (Ganesha's NLM) gets to refuse a request that closes a cycle of waits,
# ten times the second nlockd has: past it, the processes would wait until someone kills one.
REFERENCE_DEADLOCK_WAIT = 10.0


def locks_and_grant(rig, label, opts, server=SERVER_IP):
    """Locks through the kernel reach nlockd; a second owner is refused; a blocked lock is
    granted by nlockd's callback right after the unlock."""
    m1, m2 = rig.mount_pair(label, opts, server)
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
    # The kernel says which transports the mounts use: MOUNT over UDP, NFS (and so NLM) TCP.
    mounts = rig.agent.sh("grep ' %s/mntudp' /proc/mounts" % GUEST_MNT)["out"].splitlines()
    if len(mounts) != 2 or not all(",proto=tcp," in m and "mountproto=udp" in m for m in mounts):
        raise Failure("the mountproto=udp mounts are not what the kernel reports: %s" % mounts)
    return detail + "; NFS/NLM over UDP: not in this kernel (CONFIG_NFS_DISABLE_UDP_SUPPORT=y), " \
        "MOUNT over UDP only"


def scenario_service_address(rig):
    """The guest mounts through an address that arrived after nlockd started listening on
    0.0.0.0. Linux lockd takes a GRANTED only from the address it sent the LOCK to, and would
    otherwise poll for its blocked lock every 30 s: the grant must come from that address."""
    if run(["ip", "-o", "addr", "show", "dev", BRIDGE], check=False).stdout.find(
            " %s/" % SERVICE_IP) < 0:
        run(["ip", "addr", "add", SERVICE_IP + "/24", "dev", BRIDGE])
    return locks_and_grant(rig, "svc", DEFAULT_OPTS, server=SERVICE_IP)


def deadlock_pair(rig, label):
    """Two lock owners of the guest, P1 on the first mount and P2 on the second (so that they
    meet at the server), each with files A and B open."""
    m1, m2 = rig.mount_pair()
    p1, p2 = Worker(rig.agent, label + "-p1"), Worker(rig.agent, label + "-p2")
    files = {}
    for w, m in ((p1, m1), (p2, m2)):
        files[w] = ("%s/%s-a" % (m, label), "%s/%s-b" % (m, label))
        for path in files[w]:
            w.open(path)
    return p1, p2, files[p1], files[p2]


def the_waiter(rig, svid, blocker):
    """nlockd's one waiter: svid's queued request, blocked by blocker's lock alone, and blocker
    waits for nothing; a Failure otherwise."""
    waiters = rig.admin.waiters()
    ok = (len(waiters) == 1 and waiters[0]["svid"] == svid and not waiters[0]["granted"] and
          [b["svid"] for b in waiters[0]["blocked_by"]] == [blocker] and
          not waiters[0]["blocked_by"][0]["waiting"])
    if not ok:
        raise Failure("nlockd's wait-for view should show P1 (svid %d) waiting for P2 (svid %d) "
                      "alone, P2 waiting for nothing: %s" % (svid, blocker, waiters))


def scenario_deadlock(rig):
    """Two processes lock files A and B in opposite orders with F_SETLKW: P1 holds A and waits
    at nlockd for B, which P2 holds; P2's F_SETLKW on A would close the cycle and is refused
    with EDEADLK (nlm4_deadlck) at once, and nothing else changes: P1 still waits, and gets B
    by nlockd's GRANTED callback once P2 unlocks it."""
    p1, p2, (a1, b1), (a2, b2) = deadlock_pair(rig, "deadlock")
    p1.must_lock(a1, "w")
    held = wait_for("nlockd to record P1's lock", lambda: rig.admin.locks(), 10)
    p1_svid = held[0]["svid"]
    p2.must_lock(b2, "w")
    held = wait_for("nlockd to record P2's lock", lambda: len(rig.admin.locks()) == 2 and
                    rig.admin.locks(), 10)
    p2_svid = next(h["svid"] for h in held if h["svid"] != p1_svid)
    refused = rig.admin.metric("nlm_deadlocks_refused_total")
    callbacks = rig.admin.metric("nlm_callbacks_total", result="ok")
    p1_waits = p1.start("lock", file=b1, type="w", wait=True)
    wait_for("nlockd to queue P1's request for B", lambda: rig.admin.waiters(), 10)
    the_waiter(rig, p1_svid, p2_svid)
    r = p2.finish(p2.start("lock", file=a2, type="w", wait=True), CALLBACK_DEADLINE,
                  "P2's F_SETLKW on A to be refused (it closes the cycle P1 -> P2 -> P1)")
    if r["ok"] or r["errno"] != errno.EDEADLK:
        raise Failure("P2's F_SETLKW on A, which closes the cycle, should fail with EDEADLK: %s" %
                      (r.get("error") or "granted"))
    edeadlk_ms = (r["t1"] - r["t0"]) * 1000
    if edeadlk_ms > 1000:
        raise Failure("EDEADLK came %.0f ms after P2's F_SETLKW, not within a second" %
                      edeadlk_ms)
    counted = rig.admin.metric("nlm_deadlocks_refused_total") - refused
    if counted != 1:
        raise Failure("nlm_deadlocks_refused_total went up by %d, not 1" % counted)
    # Nothing else changed: P1 still waits for P2 alone, and P2's refused request is not queued.
    the_waiter(rig, p1_svid, p2_svid)
    unlock = p2.must_lock(b2, "u")
    granted = p1.finish(p1_waits, CALLBACK_DEADLINE, "P1's F_SETLKW on B after P2's unlock")
    if not granted["ok"]:
        raise Failure("P1's F_SETLKW on B failed: %s" % granted["error"])
    if granted["t1"] < unlock["t0"]:
        raise Failure("P1's F_SETLKW on B returned before P2 unlocked B")
    grant_ms = (granted["t1"] - unlock["t0"]) * 1000
    wait_for("nlockd to count the acknowledged GRANTED callback",
             lambda: rig.admin.metric("nlm_callbacks_total", result="ok") > callbacks, 10)
    held = rig.admin.locks()
    if len(held) != 2 or any(h["svid"] != p1_svid for h in held):
        raise Failure("P1 should hold A and B at nlockd, and nobody else anything: %s" % held)
    for w, paths in ((p1, (a1, b1)), (p2, (a2, b2))):
        for path in paths:
            w.close(path)
    wait_for("the guest's locks to be gone at nlockd", lambda: not rig.admin.locks(), 10)
    return ("EDEADLK %.0f ms after P2's F_SETLKW (nlm_deadlocks_refused_total +1); P1's "
            "F_SETLKW granted %.0f ms after P2's unlock" % (edeadlk_ms, grant_ms))


def ganesha_blocked(rig):
    """How many LOCKs Ganesha's NLM answered NLM4_BLOCKED (its NLM debug log)."""
    with open(rig.path("ganesha.log"), errors="replace") as f:
        return f.read().count("REQUEST RESULT: nlm4_Lock NLM4_BLOCKED")


def scenario_deadlock_reference(rig):
    """Scenario 10 against Ganesha's own NLM, the rig's reference lock manager: what it does is
    recorded, not judged. Without a deadlock check both F_SETLKW wait; past a bound the rig
    breaks the cycle as an operator would, with kill -9 of P2, and P1 should then get B."""
    p1, p2, (a1, b1), (a2, b2) = deadlock_pair(rig, "refdeadlock")
    p1.must_lock(a1, "w")
    p2.must_lock(b2, "w")
    blocked = ganesha_blocked(rig)
    p1_waits = p1.start("lock", file=b1, type="w", wait=True)
    wait_for("Ganesha to answer P1's LOCK for B BLOCKED",
             lambda: ganesha_blocked(rig) > blocked, 10)
    p2_waits = p2.start("lock", file=a2, type="w", wait=True)
    first = rig.agent.first_reply([p1_waits, p2_waits], REFERENCE_DEADLOCK_WAIT,
                                  "either F_SETLKW of the deadlock")
    if first is None:
        outcome = ("no EDEADLK within %.0f s (Ganesha answered %d LOCKs BLOCKED; both "
                   "F_SETLKW waited)" % (REFERENCE_DEADLOCK_WAIT, ganesha_blocked(rig) - blocked))
        freed, why, waiter, waits = p2.kill(), "P2 was killed", "P1", p1_waits
    else:
        req, r = first
        who = "P1" if req == p1_waits else "P2"
        outcome = "%s's F_SETLKW %s after %.0f ms" % (
            who, "was granted" if r["ok"] else "failed with " + errno.errorcode.get(
                r["errno"], str(r["errno"])), (r["t1"] - r["t0"]) * 1000)
        # The refused process gives up the lock it holds, and the other's should be granted.
        if who == "P2":
            freed, why, waiter, waits = p2.must_lock(b2, "u"), "P2 unlocked B", "P1", p1_waits
        else:
            freed, why, waiter, waits = p1.must_lock(a1, "u"), "P1 unlocked A", "P2", p2_waits
    granted = rig.agent.first_reply([waits], CALLBACK_DEADLINE, waiter + "'s F_SETLKW")
    if granted is None:
        after = "%s not granted within %.0f s after %s" % (waiter, CALLBACK_DEADLINE, why)
    elif granted[1]["ok"]:
        after = "%s granted %.0f ms after %s" % (
            waiter, (granted[1]["t1"] - freed["t0"]) * 1000, why)
    else:
        after = "%s's F_SETLKW failed after %s: %s" % (waiter, why, granted[1]["error"])
    # Whatever happened, nothing stays held: both processes end (a pending F_SETLKW cannot be
    # closed away), and a new owner takes both files. Their locks go asynchronously as they
    # exit: the new owner retries for a while.
    for w in (p1, p2) if first is not None else (p1,):
        w.kill()
    q = Worker(rig.agent, "refdeadlock-q")
    q.open(a1)
    q.open(b1)
    wait_for("A and B to be free at Ganesha", lambda: q.lock(a1, "w")["ok"] and
             q.lock(b1, "w")["ok"], 10, interval=0.2)
    q.close(a1)
    q.close(b1)
    return "reference (Ganesha's NLM): %s; %s" % (outcome, after)


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


def restart_guest_statd(rig):
    """Stops the guest's nlockd --serve nsm with SIGTERM and starts it again, the guest's
    kernel and its locks untouched (as `systemctl restart` would). It runs under the name of
    the binary the rig was given, which need not be `nlockd`."""
    rig.agent.sh(
        "pid=$(pidof %s) && kill -TERM $pid && " %
        shlex.quote(os.path.basename(rig.args.guest_nlockd)) +
        # The agent, PID 1, does not reap it: wait until it is gone or a zombie.
        "while [ -e /proc/$pid ] && [ \"$(cut -d' ' -f3 /proc/$pid/stat)\" != Z ]; do "
        "sleep 0.05; done && (setsid /run/nlk-statd </dev/null >/dev/null 2>&1 &)", timeout=60)


def scenario_statd_restart(rig):
    """The guest's nlockd --serve nsm restarts while the guest keeps running and holds a lock.
    Like rpc.statd (sm-notify runs once per boot), it must keep the kernel's registrations and
    tell no peer that the host rebooted: the server keeps the guest's lock. (Its state number
    may move on: what peers act on is a notification.)"""
    guest = Admin(GUEST_ADMIN)
    if not rig.nlockd_statd:
        rig.power_off()
        rig.boot(nlockd_statd=True)
        rig.wait_ready()
    m1, m2 = rig.mount_pair()
    a, b = Worker(rig.agent, "srestart-a"), Worker(rig.agent, "srestart-b")
    held_path, other = m1 + "/srestart", m2 + "/srestart"
    a.open(held_path)
    b.open(other)
    a.must_lock(held_path, "w")
    wait_for("nlockd to record the lock", lambda: len(rig.admin.locks()) == 1, 10)
    registrations = guest.json("/api/v1/clients?mon_name=%s" % SERVER_IP)["clients"]
    if not registrations:
        raise Failure("the guest's nlockd holds no registration for the server")
    state_before = guest.json("/api/v1/status")["state_number"]
    crashes = rig.admin.metric("nsm_crashes_detected_total") or 0
    t0 = now()
    restart_guest_statd(rig)
    wait_for("the guest's nlockd to be back and registered", lambda: guest.ready() and
             rpcinfo_in_guest(rig, "status"), 60, interval=0.1)
    back_s = now() - t0
    # A notification round, if the restarted nlockd starts one (it should not), begins with
    # its start and ends well within 5 s on loopback-near peers: give its answer that long.
    try:
        wait_for("a notification round of the restarted nlockd", lambda: (guest.metric(
            "nsm_notifications_total") or 0) > 0, 5, interval=0.1)
    except Failure:
        pass  # none: what a status monitor restarted on the same boot should do
    problems = []
    state_after = guest.json("/api/v1/status")["state_number"]
    after = guest.json("/api/v1/clients?mon_name=%s" % SERVER_IP)["clients"]
    if sorted(c["id"] for c in after) != sorted(c["id"] for c in registrations):
        problems.append("the kernel's registrations did not survive the restart: %s -> %s" %
                        (registrations, after))
    if (rig.admin.metric("nsm_crashes_detected_total") or 0) > crashes:
        problems.append("the guest's nlockd told the server that the guest rebooted (state "
                        "%d -> %d), and the server believed it" % (state_before, state_after))
    if len(rig.admin.locks()) != 1:
        problems.append("the server released the guest's lock, which its kernel still holds")
    r = b.lock(other, "w")
    if r["ok"]:
        problems.append("a second owner was granted the lock the first still holds")
    b.close(other)
    a.close(held_path)
    wait_for("the guest's locks to be gone at nlockd", lambda: not rig.admin.locks(), 10)
    if problems:
        raise Failure("; ".join(problems))
    return "guest nlockd back in %.2f s, state %d -> %d, the server's lock kept" % (
        back_s, state_before, state_after)


def scenario_nlm_beside_statd(rig):
    """nlockd --serve nlm beside the server's rpc.statd: nlockd monitors the client through it
    (SM_MON over loopback); the client's restart notification reaches rpc.statd, whose status
    callback (procedure 16, privileged loopback port) makes nlockd release the client's locks;
    after nlockd's own kill -9 and restart, its notification makes the kernel reclaim."""
    if rig.nlockd_statd:
        # The client's notification comes from its sm-notify, run by hand below.
        rig.power_off()
        rig.boot()
        rig.wait_ready()
    rig.serve_nlm_beside_statd()
    try:
        return nlm_beside_statd(rig)
    finally:
        rig.serve_nlockd_nlm()


def nlm_beside_statd(rig):
    m1, m2 = rig.mount_pair()
    a, b = Worker(rig.agent, "snlm-a"), Worker(rig.agent, "snlm-b")
    held_path, other = m1 + "/nlm-statd", m2 + "/nlm-statd"
    a.open(held_path)
    b.open(other)
    r = a.must_lock(held_path, "w")
    lock_ms = (r["t1"] - r["t0"]) * 1000
    wait_for("nlockd to record the lock", lambda: len(rig.admin.locks()) == 1, 10)
    b.must_be_denied(other, "w")
    # rpc.statd keeps a file per monitored host: nlockd's SM_MON named the client's address.
    monitored = os.listdir(rig.path("server-statd/sm"))
    if GUEST_IP not in monitored:
        raise Failure("rpc.statd does not monitor %s for nlockd: %s" % (GUEST_IP, monitored))
    # The client announces a reboot as its sm-notify does at boot (-f: again on this boot),
    # with a new state; its kernel keeps the lock, the server must drop it. sm-notify works on
    # a copy of the guest's state directory, since it empties the monitor list that it
    # notifies, and the real one must survive for a later reboot's notification. Its new state
    # goes back to the real directory: sm-notify gave it to the kernel, whose lock requests
    # carry it, and a later reboot must announce a newer one (Ganesha keeps the locks taken
    # under the state that a notification announces).
    t0 = now()
    rig.agent.sh("rm -rf /run/tmp/nfs && mkdir /run/tmp/nfs && cd /var/lib/nfs && "
                 "cp -a sm sm.bak state /run/tmp/nfs && sm-notify -f -P /run/tmp/nfs && "
                 "cp /run/tmp/nfs/state /var/lib/nfs/state")
    wait_for("nlockd to release the client's lock on rpc.statd's callback",
             lambda: not rig.admin.locks(), 30)
    release_ms = (now() - t0) * 1000
    with open(rig.path("nlockd-nlm.log"), errors="replace") as f:
        log = f.read()
    if "refused: not loopback with a reserved port" in log:
        raise Failure("nlockd refused rpc.statd's status callback")
    b.must_lock(other, "w")
    a.close(held_path)
    b.close(other)
    wait_for("the guest's locks to be gone at nlockd", lambda: not rig.admin.locks(), 10)
    # nlockd's own restart: it notifies the client hosts it monitored, and the kernel reclaims.
    c = Worker(rig.agent, "snlm-c")
    c.open(held_path)
    c.must_lock(held_path, "w")
    wait_for("nlockd to record the lock", lambda: len(rig.admin.locks()) == 1, 10)
    rig.nlockd.stop(signal.SIGKILL)
    t1 = now()
    rig.start_nlockd(serve="nlm")
    wait_for("the kernel's reclaim", lambda: rig.admin.metric("nlm_reclaims_total") >= 1, 60)
    reclaim_s = now() - t1
    held = rig.admin.locks()
    if len(held) != 1 or held[0]["awaiting_reclaim"]:
        raise Failure("after the reclaim nlockd should hold the one lock: %s" % held)
    c.close(held_path)
    wait_for("the guest's locks to be gone at nlockd", lambda: not rig.admin.locks(), 10)
    return ("first lock (SM_MON to rpc.statd included) %.0f ms, sm-notify to release %.0f ms, "
            "restart-to-reclaim %.2f s" % (lock_ms, release_ms, reclaim_s))


def scenario_ganesha_nlm(rig):
    """Ganesha's own NLM with nlockd --serve nsm as the server's status monitor (the rig
    switches the server side, SIDE): Ganesha monitors the client through it (SM_MON over
    loopback TCP); the client loses power holding a lock; its restart notification reaches
    nlockd, which calls Ganesha's procedure 16 from a privileged loopback port, and Ganesha
    releases the lock."""
    status = Admin(STATUS_ADMIN)
    m1, m2 = rig.mount_pair()
    a, b = Worker(rig.agent, "gnlm-a"), Worker(rig.agent, "gnlm-b")
    held_path, other = m1 + "/ganesha-nlm", m2 + "/ganesha-nlm"
    a.open(held_path)
    b.open(other)
    r = a.must_lock(held_path, "w")
    lock_ms = (r["t1"] - r["t0"]) * 1000
    # Ganesha holds it: another owner of the client is refused by Ganesha's NLM.
    b.must_be_denied(other, "w")
    b.close(other)
    # Ganesha's SM_MON: the client by address (NSM_Use_Caller_Name off), calling back NLM
    # version 4 procedure 16, with the server's node name as my_name.
    node = os.uname().nodename
    clients = status.json("/api/v1/clients?mon_name=%s" % GUEST_IP)["clients"]
    if not any(c["my_prog"] == 100021 and c["my_vers"] == 4 and c["my_proc"] == 16 and
               c["my_name"] == node for c in clients):
        raise Failure("nlockd --serve nsm holds no Ganesha registration (%s, 100021, 4, 16) "
                      "for %s: %s" % (node, GUEST_IP, clients))
    callbacks = status.metric("nlm_callbacks_total", kind="status", result="ok") or 0
    crashes = status.metric("nsm_crashes_detected_total") or 0
    rig.power_off()
    t0 = now()
    # The same status monitor as before (rpc.statd's sm-notify or the guest's nlockd) sends the
    # restart notification: either reaches the server's nlockd.
    rig.boot(nlockd_statd=rig.nlockd_statd)

    noticed = []

    def called_back():
        if rig.qemu.poll() is not None:
            raise Failure("QEMU exited (%s) during the boot" % rig.qemu.returncode)
        ready = rig.agent.has_event("ready")
        if ready and now() > ready["host_time"] + 60:
            raise Failure("no status callback to Ganesha a minute after the guest came back")
        if not noticed and (status.metric("nsm_crashes_detected_total") or 0) > crashes:
            noticed.append(now())
        return (status.metric("nlm_callbacks_total", kind="status", result="ok") or 0) > \
            callbacks and now()

    # Ganesha answers procedure 16 once it has dropped the host's locks.
    released_at = wait_for("nlockd's status callback to Ganesha", called_back, BOOT_DEADLINE,
                           interval=0.02)
    if not (status.metric("nsm_crashes_detected_total") or 0) > crashes:
        raise Failure("nlockd called Ganesha back without counting the reboot")
    # Seen in the same poll as the callback: the whole round trip took less than one poll.
    notify_ms = (released_at - (noticed[0] if noticed else released_at)) * 1000
    with open(rig.path("nlockd-nsm.log"), errors="replace") as f:
        log = f.read()
    if not re.search(r"nsm host %s rebooted" % re.escape(GUEST_IP), log):
        raise Failure("nlockd-nsm.log does not show the reboot of %s" % GUEST_IP)
    # Ganesha takes procedure 16 from any loopback port, Linux lockd only from a privileged
    # one (scenario 4): nlockd must not have fallen back to an unprivileged port.
    if "cannot bind a privileged source port" in log:
        raise Failure("nlockd called Ganesha back from an unprivileged port")
    boot_s = rig.wait_ready()
    # A new owner of the rebooted client takes the lock the old boot held.
    m1, m2 = rig.mount_pair()
    c, d = Worker(rig.agent, "gnlm-c"), Worker(rig.agent, "gnlm-d")
    c.open(held_path)
    d.open(other)
    c.must_lock(held_path, "w")
    d.must_be_denied(other, "w")
    c.close(held_path)
    d.close(other)
    return ("lock through Ganesha %.0f ms, boot %.1f s, reboot-to-release (QEMU start to "
            "Ganesha's answer to procedure 16) %.1f s, reboot counted to callback answered "
            "%.0f ms (polled every 20 ms)" % (lock_ms, boot_s, released_at - t0, notify_ms))


def rpcinfo_in_guest(rig, name):
    r = rig.agent.sh("rpcinfo -p 127.0.0.1", check=False)
    return r["out"] if name in r["out"] else None


def guest_state_number(rig):
    r = rig.agent.sh("od -An -t d4 /var/lib/nfs/state")
    return int(r["out"].split()[0])


SCENARIOS = {
    "1": ("kernel locks, conflicts, blocked lock granted by callback (TCP)", scenario_locks_tcp),
    "6": ("the same over UDP mounts where the kernel has them", scenario_locks_udp),
    "9": ("the same through a service address added after start (callback from it)",
          scenario_service_address),
    "10": ("deadlock of two processes through two mounts: EDEADLK, then the other's grant",
           scenario_deadlock),
    "11": ("the same deadlock against Ganesha's own NLM (reference: recorded, not judged)",
           scenario_deadlock_reference),
    "2": ("nlockd kill -9 and restart: kernel reclaims", scenario_restart),
    "3": ("guest power-off and reboot: sm-notify releases its locks", scenario_reboot),
    "4": ("nlockd --serve nsm as the guest's status monitor: callback, reclaim, reboot",
          scenario_nlockd_statd),
    "5": ("Ganesha's own NLM with nlockd --serve nsm as its status monitor: reboot releases",
          scenario_ganesha_nlm),
    "7": ("restart of the guest's nlockd --serve nsm, no reboot: the server keeps the locks",
          scenario_statd_restart),
    "8": ("nlockd --serve nlm beside the server's rpc.statd: callback releases, restart reclaims",
          scenario_nlm_beside_statd),
}
SCENARIOS.update(kernel_server.SCENARIOS)
# 12s to 14s (rpc.statd on both guests) run where the rig's guest runs rpc.statd anyway, after 8;
# 12 to 14 (nlockd) where it runs nlockd, after 11 (docs/kernel-rig.md, "What it checks").
# 15 follows 12s to 14s, whose server guest runs rpc.statd as 15 needs it.
ORDER = ["1", "10", "9", "6", "2", "3", "8", "12s", "13s", "14s", "15", "4", "7", "5", "11", "12",
         "13", "14"]
# Scenarios on the kernel NFS server's guest: after the last of a run of them it is switched off.
ON_KERNEL_SERVER = set(kernel_server.SCENARIOS)
# Scenarios whose guest runs nlockd as its status monitor: when one runs first, the rig's first
# boot is already in that mode.
NLOCKD_STATD_FIRST = {"4", "7", "12", "13", "14"}
# The server side each scenario needs, when not the usual one: the rig switches before the
# first of a run of them and back after the last (scenarios 5 and 11 share one switch).
SIDE = {"5": GANESHA_NLM, "11": GANESHA_NLM}
# Scenarios run only when named: 12s to 14s time Debian's rpc.statd beside the kernel's nfsd for
# comparison with nlockd (three boots, about 100 s), not nlockd itself.
OPT_IN = {"12s", "13s", "14s"}
