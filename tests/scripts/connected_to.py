#!/usr/bin/env python3
"""Whether a process holds an established TCP connection to a port on this machine: for
tests that must act once a launcher has reached the rendezvous store. Reads /proc only.

    connected_to.py PID PORT    exit 0 when it does, 1 when not (or PID is gone)
"""
import os
import sys


def socket_inodes(pid):
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    except OSError:
        pass
    return inodes


def main():
    pid, port = sys.argv[1], int(sys.argv[2])
    inodes = socket_inodes(pid)
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            table = open(name).readlines()[1:]
        except OSError:
            continue
        for line in table:
            fields = line.split()
            remote_port = int(fields[2].split(":")[1], 16)
            established = fields[3] == "01"
            if remote_port == port and established and fields[9] in inodes:
                return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
