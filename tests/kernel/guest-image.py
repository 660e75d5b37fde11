#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Prepares what QEMU boots, from Debian's kernel package unpacked into the rig's cache.

guest-image.py vmlinux VMLINUZ OUT
    Unpacks the kernel from its self-extracting image. QEMU starts the uncompressed ELF
    directly (PVH entry): under emulation the kernel's own xz decompression takes ~20 s.
guest-image.py initramfs MODULES_DIR INIT_SCRIPT BUSYBOX OUT [nfsd]
    Builds the initramfs: busybox-static, the kernel modules the rig needs (with the modules
    they depend on, in load order) and INIT_SCRIPT as /init. MODULES_DIR is lib/modules/VERSION
    of the unpacked package; OUT is a gzipped newc cpio. With `nfsd`, the kernel NFS server's
    guest's: its disk and file system, and nfsd, too.
"""
import gzip
import lzma
import os
import re
import sys

# What the guest needs: virtio PCI devices, the network card, the serial port of the agent,
# the entropy source (without it the first getrandom() waits many seconds under emulation),
# 9p for the host's root and the state directory, and the NFSv3 client with lockd.
WANTED = ["virtio_pci", "virtio_net", "virtio_console", "virtio_rng", "9pnet_virtio", "9p",
          "nfsv3", "lockd"]
# The kernel NFS server's guest (scenarios 12 to 14) adds the disk that holds its export, that
# disk's file system (ext4, which asks the crypto API for crc32c at every mount) and nfsd. A
# separate image: the client's boots do not unpack and load what they do not use.
WANTED_NFSD = WANTED + ["virtio_blk", "crc32c_generic", "ext4", "nfsd"]


def index_modules(modules_dir):
    paths = {}
    for dirpath, _, files in os.walk(os.path.join(modules_dir, "kernel")):
        for name in files:
            if name.endswith(".ko"):
                paths[name[:-3].replace("-", "_")] = os.path.join(dirpath, name)
    return paths


def depends_of(path):
    with open(path, "rb") as f:
        data = f.read()
    match = re.search(rb"\x00depends=([^\x00]*)\x00", data)
    if not match or not match.group(1):
        return []
    return [d.decode().replace("-", "_") for d in match.group(1).split(b",") if d]


def load_order(paths, wanted):
    order, seen = [], set()

    def visit(name, chain):
        if name in seen:
            return
        if name in chain:
            sys.exit("guest-image: module dependency cycle through " + name)
        if name not in paths:
            sys.exit("guest-image: module %s not in the kernel package" % name)
        for dep in depends_of(paths[name]):
            visit(dep, chain | {name})
        seen.add(name)
        order.append(name)

    for name in wanted:
        visit(name, set())
    return order


class Cpio:
    """Writes the newc format the kernel unpacks."""

    def __init__(self, out):
        self.out = out
        self.ino = 1

    def entry(self, name, mode, data=b""):
        name_bytes = name.encode() + b"\x00"
        fields = [self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_bytes), 0]
        self.ino += 1
        header = b"070701" + b"".join(b"%08X" % f for f in fields)
        self.out.write(header + name_bytes)
        self.out.write(b"\x00" * ((4 - (len(header) + len(name_bytes)) % 4) % 4))
        self.out.write(data)
        self.out.write(b"\x00" * ((4 - len(data) % 4) % 4))

    def directory(self, name):
        self.entry(name, 0o040755)

    def file(self, name, data, mode=0o644):
        self.entry(name, 0o100000 | mode, data)

    def symlink(self, name, target):
        self.entry(name, 0o120777, target.encode())

    def close(self):
        self.entry("TRAILER!!!", 0)


def vmlinux(vmlinuz, out_path):
    with open(vmlinuz, "rb") as f:
        image = f.read()
    start = image.find(b"\xfd7zXZ\x00")
    if start < 0:
        sys.exit("guest-image: %s holds no xz stream (another compression?)" % vmlinuz)
    # The stream is followed by the image's trailer, which the decompressor leaves unused.
    elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(image[start:])
    if not elf.startswith(b"\x7fELF"):
        sys.exit("guest-image: the xz stream in %s is not an ELF kernel" % vmlinuz)
    with open(out_path + ".tmp", "wb") as f:
        f.write(elf)
    os.rename(out_path + ".tmp", out_path)


def initramfs(modules_dir, init_script, busybox, out_path, role="client"):
    paths = index_modules(modules_dir)
    order = load_order(paths, WANTED_NFSD if role == "nfsd" else WANTED)
    tmp = out_path + ".tmp"
    with gzip.open(tmp, "wb", compresslevel=6) as out:
        cpio = Cpio(out)
        for d in ["bin", "dev", "proc", "sys", "newroot", "modules"]:
            cpio.directory(d)
        with open(busybox, "rb") as f:
            cpio.file("bin/busybox", f.read(), 0o755)
        cpio.symlink("bin/sh", "busybox")
        with open(init_script, "rb") as f:
            cpio.file("init", f.read(), 0o755)
        for name in order:
            with open(paths[name], "rb") as f:
                cpio.file("modules/%s.ko" % name, f.read())
        cpio.file("modules/order", ("\n".join(order) + "\n").encode())
        cpio.close()
    os.rename(tmp, out_path)
    print("guest-image: %s with %d modules: %s" % (out_path, len(order), " ".join(order)))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "vmlinux":
        vmlinux(*sys.argv[2:])
    elif len(sys.argv) in (6, 7) and sys.argv[1] == "initramfs" and sys.argv[6:] in ([], ["nfsd"]):
        initramfs(*sys.argv[2:])
    else:
        sys.exit(__doc__)
