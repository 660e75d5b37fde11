#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prints, in hex, the NFSv3 file handle of a regular file of an NFS server's export, as an NLM
client sends it in nlm4_lock.fh: the MOUNT v3 MNT of the export's root (RFC 1813 section 5.2.1)
then an NFSv3 LOOKUP of the file in it (RFC 1813 section 3.3.3), over TCP with AUTH_SYS as
root, the ports found through the server's portmapper. bench/run_ganesha_ab.sh uses it to hand
nlockd-load a handle that NFS-Ganesha's NLM can lock (it locks only real files of its exports).

Usage: bench/ganesha_fh.py HOST EXPORT_PATH FILE_NAME
"""
import socket
import struct
import sys

PMAP_PROG, PMAP_VERS, PMAPPROC_GETPORT = 100000, 2, 3
MOUNT_PROG, MOUNT_V3, MOUNTPROC3_MNT = 100005, 3, 1
NFS_PROG, NFS_V3, NFSPROC3_LOOKUP = 100003, 3, 3
IPPROTO_TCP = 6
AUTH_NONE, AUTH_SYS = 0, 1
# RFC 1813: a version 3 file handle is at most 64 bytes; a longer one is a broken reply.
NFS3_FHSIZE = 64
# A reply larger than this is not one of the three small replies asked for.
MAX_RECORD = 1 << 20
TIMEOUT_S = 10


class Failure(Exception):
    pass


def pad(data):
    return data + b"\0" * (-len(data) % 4)


def opaque(data):
    return struct.pack(">I", len(data)) + pad(data)


class Reader:
    """Reads XDR items off a reply body; running past its end is a Failure."""

    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, n):
        if self.at + n > len(self.data):
            raise Failure("reply ends early (%d bytes, wanted %d more at %d)" %
                          (len(self.data), n, self.at))
        chunk = self.data[self.at:self.at + n]
        self.at += n
        return chunk

    def u32(self):
        return struct.unpack(">I", self.take(4))[0]

    def opaque(self, limit):
        n = self.u32()
        if n > limit:
            raise Failure("opaque of %d bytes, more than %d" % (n, limit))
        data = self.take(n)
        self.take(-n % 4)
        return data


def auth_sys_root():
    body = struct.pack(">I", 0) + opaque(b"nlockd-bench") + struct.pack(">IIII", 0, 0, 0, 0)
    return struct.pack(">I", AUTH_SYS) + opaque(body)


def call(host, port, prog, vers, proc, args, cred):
    """One ONC RPC call over a fresh TCP connection; returns the accepted reply's result."""
    xid = 0x6e6c6b64
    message = (struct.pack(">IIIIII", xid, 0, 2, prog, vers, proc) + cred +
               struct.pack(">II", AUTH_NONE, 0) + args)
    with socket.create_connection((host, port), timeout=TIMEOUT_S) as sock:
        sock.sendall(struct.pack(">I", 0x80000000 | len(message)) + message)
        record = b""
        last = False
        while not last:
            mark = struct.unpack(">I", recv_exact(sock, 4))[0]
            last, n = bool(mark & 0x80000000), mark & 0x7fffffff
            if len(record) + n > MAX_RECORD:
                raise Failure("reply record longer than %d bytes" % MAX_RECORD)
            record += recv_exact(sock, n)
    reply = Reader(record)
    if reply.u32() != xid or reply.u32() != 1:
        raise Failure("not a reply to our call (program %d)" % prog)
    if reply.u32() != 0:
        raise Failure("program %d version %d procedure %d: call denied" % (prog, vers, proc))
    reply.u32()  # verifier flavor
    reply.opaque(400)
    accept_stat = reply.u32()
    if accept_stat != 0:
        raise Failure("program %d version %d procedure %d: accept_stat %d" %
                      (prog, vers, proc, accept_stat))
    return reply


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise Failure("connection closed mid-reply")
        data += chunk
    return data


def getport(host, prog, vers):
    args = struct.pack(">IIII", prog, vers, IPPROTO_TCP, 0)
    no_auth = struct.pack(">II", AUTH_NONE, 0)
    port = call(host, 111, PMAP_PROG, PMAP_VERS, PMAPPROC_GETPORT, args, no_auth).u32()
    if port == 0:
        raise Failure("program %d version %d is not registered over TCP at %s" %
                      (prog, vers, host))
    return port


def file_handle(host, export, name):
    cred = auth_sys_root()
    mnt = call(host, getport(host, MOUNT_PROG, MOUNT_V3), MOUNT_PROG, MOUNT_V3, MOUNTPROC3_MNT,
               opaque(export.encode()), cred)
    status = mnt.u32()
    if status != 0:
        raise Failure("MNT %s: mountstat3 %d" % (export, status))
    root = mnt.opaque(NFS3_FHSIZE)
    lookup = call(host, getport(host, NFS_PROG, NFS_V3), NFS_PROG, NFS_V3, NFSPROC3_LOOKUP,
                  opaque(root) + opaque(name.encode()), cred)
    status = lookup.u32()
    if status != 0:
        raise Failure("LOOKUP %s in %s: nfsstat3 %d" % (name, export, status))
    return lookup.opaque(NFS3_FHSIZE)


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        print(file_handle(argv[1], argv[2], argv[3]).hex())
    except (Failure, OSError) as e:
        print("ganesha_fh: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
