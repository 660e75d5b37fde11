#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs the kernel client rig (docs/kernel-rig.md). run.sh starts it inside a network namespace
of its own with a private /run; it starts rpcbind, NFS-Ganesha (NFSv3, its NLM off) and nlockd
there, boots a Debian kernel under QEMU as the NFS client (and for scenarios 12 to 14 a second
as the kernel NFS server), and drives the guests' agents (agent.py) through the scenarios
(scenarios.py, kernel_server.py).
"""
import argparse
import sys
import traceback

from host import USUAL, Failure, Rig, now, tail
from scenarios import NLOCKD_STATD_FIRST, ON_KERNEL_SERVER, OPT_IN, ORDER, SCENARIOS, SIDE

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nlockd", required=True)
    parser.add_argument("--guest-nlockd", required=True)  # the guests' status monitor
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--initrd", required=True)
    parser.add_argument("--initrd-nfsd", required=True)
    parser.add_argument("--kernel-config", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("scenarios", nargs="*")
    args = parser.parse_args()
    wanted = args.scenarios or [s for s in ORDER if s not in OPT_IN]
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
            # Scenarios 4, 7, 12 to 14 first: the guest runs nlockd as its status monitor from
            # the first boot.
            rig.boot(nlockd_statd=wanted[0] in NLOCKD_STATD_FIRST)
            print("kernel: guest booted in %.1f s" % rig.wait_ready(), flush=True)
            t0 = now()
            rig.mount_pair()
            print("kernel: first mounts in %.1f s" % (now() - t0), flush=True)
        except Failure as e:
            print("FAIL setup: %s\n%s" % (e, rig.logs()), flush=True)
            print("kernel: 0 passed, %d failed" % len(wanted))
            return 1
        for i, key in enumerate(wanted):
            title, fn = SCENARIOS[key]
            side = SIDE.get(key, USUAL)
            following = SIDE.get(wanted[i + 1], USUAL) if i + 1 < len(wanted) else USUAL
            t0 = now()
            try:
                rig.serve(side)
                detail = fn(rig)
                # Scenarios on another server side share one switch; the usual side comes back
                # after the last of them (both nlockds exiting 0 is part of the scenario).
                if following != side:
                    rig.serve(USUAL)
                if i + 1 == len(wanted) or wanted[i + 1] not in ON_KERNEL_SERVER:
                    rig.stop_server_guest()
                passed += 1
                print("PASS %s %s (%.1f s): %s" % (key, title, now() - t0, detail), flush=True)
            except Failure as e:
                failed += 1
                print("FAIL %s %s (%.1f s): %s\n%s" % (key, title, now() - t0, e, rig.logs()),
                      flush=True)
                try:
                    rig.serve(USUAL)
                except Failure as again:
                    print("kernel: the usual server side does not come back cleanly: %s" % again,
                          flush=True)
                rig.settle()
                # The next scenario on the kernel NFS server boots it afresh.
                rig.stop_server_guest()
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
