#!/usr/bin/env python3
"""Idle TCP connections to a job's store, as a port scanner, a health check or a flood opens them
(review S2): for tests that check the store survives them. Waits for 127.0.0.1:PORT to listen,
opens COUNT connections that send nothing, prints one line once all are open, and holds them
until its standard input closes (the server may close them sooner).

    idle_connections.py PORT COUNT    exit 0; 77 when this process cannot hold COUNT descriptors;
                                      1 when the port never listens or a connection is refused
"""
import resource
import socket
import sys
import time

LISTEN_WAIT_S = 60  # the launcher starts its store at once; a loaded machine may take seconds
CONNECT_TIMEOUT_S = 10  # a server that stopped accepting leaves connect() waiting on its backlog


def raise_file_limit(count):
    """Lifts this process's soft descriptor limit to what COUNT sockets need, or says why not."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = count + 64
    if hard != resource.RLIM_INFINITY and hard < needed:
        print(f"skipped: this process may hold {hard} descriptors, the flood needs {needed}")
        sys.exit(77)
    if soft != resource.RLIM_INFINITY and soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def wait_until_listening(port):
    deadline = time.monotonic() + LISTEN_WAIT_S
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError as error:
            if time.monotonic() > deadline:
                sys.exit(f"idle_connections: nothing listens on 127.0.0.1:{port} ({error})")
            time.sleep(0.05)


def main():
    port, count = int(sys.argv[1]), int(sys.argv[2])
    raise_file_limit(count)
    wait_until_listening(port)
    start = time.monotonic()
    held = []
    for i in range(count):
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S))
        except OSError as error:
            sys.exit(f"idle_connections: connection {i + 1} of {count} to port {port}: {error}")
    print(f"{count} idle connections open in {time.monotonic() - start:.2f} s", flush=True)
    sys.stdin.read()  # until the test closes the pipe


if __name__ == "__main__":
    main()
