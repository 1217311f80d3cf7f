#!/usr/bin/env python3
"""A peer that falls silent without closing its connection (a node that lost power, a partition).

Two gateways in two network namespaces joined by a veth pair, with transport.peer_timeout_ms at
2 s. Once they are connected, both ends of the veth pair go down, as a pulled cable: no FIN, no
RST, nothing fails on the sockets at once. Pulled for less than the limit (1.2 s), the link is a
broken connection, not a lost peer: neither gateway may count the other down, and both reconnect
and carry their session on. Pulled for good, each gateway must report the other down within the
limit (plus a heartbeat interval), where the kernel alone takes many minutes. When the link is up
again, they must connect again. Needs root (namespaces); exits 77 otherwise.

Usage: silent_peer.py --gradgate BUILD/cli/gradgate
"""
import argparse
import sys
import time

from netns_link import query, run, run_on_link, start_gateway, stop_all

PEER_TIMEOUT_MS = 2000
DOWN_WITHIN_SECONDS = 8  # the limit, one more keepalive or retransmission, and the status poll
UP_WITHIN_SECONDS = 10   # a redial (backoff up to 200 ms) and its handshake
SHORT_PULL_SECONDS = 1.2  # beyond half the limit (the connections close), within the limit


def peers_up(link, rank, admin_port):
    status = query(link.ns[rank], f"http://127.0.0.1:{admin_port}/v1/status")
    return None if status is None else status.get("peers_up")


def wait_until(condition, seconds):
    """Seconds until `condition()` held (bounded), or None."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if condition():
            return time.monotonic() - start
        time.sleep(0.1)
    return None


def scenario(args, link, work):
    processes = []
    try:
        ports, admin = [0, 0], [0, 0]
        for rank in range(2):
            config = f"""job:
  id: 5
  node_rank: {rank}
  nodes: ["{link.addr[0]}:{ports[0]}", "{link.addr[1]}:{ports[1]}"]
ingress:
  socket: {work}/gateway{rank}.sock
admin:
  listen: "127.0.0.1:0"
transport:
  reconnect_min_ms: 10
  reconnect_max_ms: 200
  peer_timeout_ms: {PEER_TIMEOUT_MS}
"""
            ready = start_gateway(link, rank, args.gradgate, config, work, processes)
            ports[rank], admin[rank] = ready["port"], ready["admin_port"]

        def connected():
            return peers_up(link, 0, admin[0]) == [1] and peers_up(link, 1, admin[1]) == [0]

        def both_down():
            return peers_up(link, 0, admin[0]) == [] and peers_up(link, 1, admin[1]) == []

        if wait_until(connected, 30) is None:
            return ["the gateways did not connect"]
        failures = []

        def pull(up):
            for rank in range(2):
                run("ip", "-n", link.ns[rank], "link", "set", link.dev[rank], "up" if up else "down")

        pull(False)
        dark = time.monotonic()
        seen_down, restored = False, False
        while time.monotonic() - dark < SHORT_PULL_SECONDS + 3:
            if not restored and time.monotonic() - dark >= SHORT_PULL_SECONDS:
                pull(True)
                restored = True
            seen_down = seen_down or [] in (peers_up(link, 0, admin[0]), peers_up(link, 1, admin[1]))
            time.sleep(0.05)
        reconnects = [sum(" reconnected (" in line for line in open(f"{work}/gateway{rank}.log"))
                      for rank in range(2)]
        if seen_down:
            failures.append(f"a link dark for {SHORT_PULL_SECONDS} s (peer_timeout_ms "
                            f"{PEER_TIMEOUT_MS}) counted a peer down")
        if not all(reconnects):
            failures.append(f"no reconnection carried the session on after a short pull "
                            f"(reconnections logged by rank: {reconnects})")

        for rank in range(2):
            run("ip", "-n", link.ns[rank], "link", "set", link.dev[rank], "down")
        down = wait_until(both_down, DOWN_WITHIN_SECONDS)
        if down is None:
            failures.append(f"a silent peer still counted up {DOWN_WITHIN_SECONDS} s after the "
                            f"link went dark (peer_timeout_ms {PEER_TIMEOUT_MS})")
        for rank in range(2):
            run("ip", "-n", link.ns[rank], "link", "set", link.dev[rank], "up")
        up = wait_until(connected, UP_WITHIN_SECONDS)
        if up is None:
            failures.append(f"not connected again {UP_WITHIN_SECONDS} s after the link came back")
        print(f'{{"peer_timeout_ms": {PEER_TIMEOUT_MS}, "short_pull_s": {SHORT_PULL_SECONDS}, '
              f'"reconnections": {reconnects}, "down_after_s": {down}, "up_again_after_s": {up}}}')
        return failures
    finally:
        stop_all(processes)

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gradgate", required=True)
    args = parser.parse_args()
    return run_on_link("silent_peer", lambda link, work: scenario(args, link, work))


if __name__ == "__main__":
    sys.exit(main())
