#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The guest's agent: runs as the guest's PID 1 (after guest-init.sh) and answers the host over
the virtio serial port named nlk.agent, one JSON object per line each way.

Requests carry an "id" that the reply repeats. Operations:
  {"op": "sh", "cmd": "...", "timeout": S}      run a shell command: {"rc", "out"}
  {"op": "open"|"lock"|"close", "worker": W, ...}  POSIX lock calls made by worker process W
  {"op": "kill", "worker": W}                    ends worker W with SIGKILL: {"ok", "t0", "t1"}
  {"op": "reset"}                                ends every worker (their locks go with them)
The agent sends {"event": "ready", "uptime": S} once rpc.statd is registered with rpcbind.

Each worker is a separate process, because POSIX locks belong to a process: two lock owners of
one client need two processes (and, to meet at the server instead of inside the client's
kernel, two mounts made with nosharecache). A worker answers its requests in order, so a
blocking lock call holds back only that worker.
"""
import fcntl
import glob
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time


def lines_of(read):
    """The lines of a byte stream (the host's end uses this too); read() returns the next
    chunk, b"" at the end."""
    buf = b""
    while True:
        chunk = read()
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line


def worker_main():
    files = {}
    for line in sys.stdin:
        req = json.loads(line)
        reply = {"id": req["id"]}
        t0 = time.monotonic()
        try:
            op = req["op"]
            if op == "open":
                files[req["file"]] = os.open(req["path"], os.O_RDWR | os.O_CREAT, 0o666)
            elif op == "lock":
                kind = {"w": fcntl.LOCK_EX, "r": fcntl.LOCK_SH, "u": fcntl.LOCK_UN}[req["type"]]
                if not req.get("wait") and kind != fcntl.LOCK_UN:
                    kind |= fcntl.LOCK_NB
                # lockf() is fcntl(F_SETLK / F_SETLKW) on a byte range here.
                fcntl.lockf(files[req["file"]], kind, req.get("len", 0), req.get("start", 0))
            elif op == "close":
                os.close(files.pop(req["file"]))
            else:
                raise ValueError("unknown operation " + op)
            reply["ok"] = True
        except OSError as e:
            reply.update(ok=False, errno=e.errno, error=str(e))
        except (KeyError, ValueError) as e:
            reply.update(ok=False, errno=0, error="bad request: %r" % (e,))
        reply.update(t0=t0, t1=time.monotonic())
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def rpc_call_udp(address, program, version, procedure, args=b"", timeout=0.5):
    """One ONC RPC call over UDP with AUTH_NONE (RFC 5531): the accepted reply's results, or
    None (no answer in time, or not accepted with SUCCESS)."""
    xid = int.from_bytes(os.urandom(4), "big")
    call = struct.pack(">10I", xid, 0, 2, program, version, procedure, 0, 0, 0, 0) + args
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.sendto(call, address)
            while True:
                reply = sock.recv(8192)
                if len(reply) >= 24 and struct.unpack(">I", reply[:4])[0] == xid:
                    break
        except OSError:
            return None
    _, message_type, reply_stat, _, verifier_length = struct.unpack(">5I", reply[:20])
    if message_type != 1 or reply_stat != 0:
        return None
    at = 20 + (verifier_length + 3) // 4 * 4
    if len(reply) < at + 4 or struct.unpack(">I", reply[at:at + 4])[0] != 0:
        return None
    return reply[at + 4:]


def status_monitor_answers():
    """Whether the status monitor (program 100024 version 1) is registered with the local
    rpcbind for UDP and answers its NULL procedure there."""
    results = rpc_call_udp(("127.0.0.1", 111), 100000, 2, 3, struct.pack(">4I", 100024, 1, 17, 0))
    if results is None or len(results) < 4:
        return False
    port = struct.unpack(">I", results[:4])[0]
    return port != 0 and rpc_call_udp(("127.0.0.1", port), 100024, 1, 0) is not None


class Agent:
    def __init__(self, fd):
        self.fd = fd
        self.out_lock = threading.Lock()
        self.workers = {}

    def send(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        with self.out_lock:
            while data:
                data = data[os.write(self.fd, data):]

    def run_shell(self, req):
        try:
            done = subprocess.run(req["cmd"], shell=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=req.get("timeout", 60))
            self.send({"id": req["id"], "rc": done.returncode,
                       "out": done.stdout.decode(errors="replace")})
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode(errors="replace")
            self.send({"id": req["id"], "rc": -1, "out": out + "\n(timed out)"})

    def worker(self, name):
        proc = self.workers.get(name)
        if proc is None:
            proc = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, bufsize=1)
            self.workers[name] = proc
            threading.Thread(target=self.forward, args=(proc,), daemon=True).start()
        return proc

    def reset(self, req):
        for proc in self.workers.values():
            proc.kill()
            proc.wait()
        self.workers.clear()
        self.send({"id": req["id"], "ok": True})

    def kill(self, req):
        """As `kill -9` of a process blocked in F_SETLKW: the kernel gives up its waiting request
        and releases its locks as it exits. A request the worker had pending gets no reply."""
        t0 = time.monotonic()
        proc = self.workers.pop(req["worker"], None)
        if proc is not None:
            proc.kill()
            proc.wait()
        self.send({"id": req["id"], "ok": proc is not None, "t0": t0, "t1": time.monotonic()})

    def forward(self, proc):
        for line in proc.stdout:
            self.send(json.loads(line))

    def announce_ready(self):
        # statd registers after it daemon-like starts; the host mounts only once it answers.
        # Asked in-process (what `rpcinfo -T udp 127.0.0.1 status 1` asks): an rpcinfo exec'd
        # every 50 ms took most of the guest's one emulated CPU from the status monitor whose
        # start it waited for, slowing a slow start further.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if status_monitor_answers():
                with open("/proc/uptime") as f:
                    uptime = float(f.read().split()[0])
                print("agent: ready at %.1f s" % uptime, file=sys.stderr, flush=True)
                self.send({"event": "ready", "uptime": uptime})
                return
            time.sleep(0.05)
        self.send({"event": "failed", "error": "rpc.statd did not register with rpcbind"})

    def serve(self):
        threading.Thread(target=self.announce_ready, daemon=True).start()
        for line in lines_of(self.read_port):
            try:
                req = json.loads(line)
                if req.get("op") == "sh":
                    threading.Thread(target=self.run_shell, args=(req,), daemon=True).start()
                elif req.get("op") == "reset":
                    self.reset(req)
                elif req.get("op") == "kill":
                    self.kill(req)
                else:
                    proc = self.worker(req["worker"])
                    proc.stdin.write(json.dumps(req) + "\n")
                    proc.stdin.flush()
            except (ValueError, KeyError, OSError) as e:
                self.send({"event": "bad-request", "error": repr(e)})

    def read_port(self):
        while True:
            chunk = os.read(self.fd, 65536)
            if chunk:
                return chunk
            # The host is not connected: wait for it without spinning.
            time.sleep(0.1)


def open_port(name):
    for path in glob.glob("/sys/class/virtio-ports/*/name"):
        with open(path) as f:
            if f.read().strip() == name:
                return os.open("/dev/" + path.split("/")[-2], os.O_RDWR)
    raise SystemExit("agent: no virtio serial port named " + name)


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker_main()
    else:
        Agent(open_port("nlk.agent")).serve()
