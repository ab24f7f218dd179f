#!/usr/bin/env python3
"""Probe a running tessera server the way careless and hostile clients do.

  edge-probe.py oversize URL KEY [--sizes 1.1,5,50] [--tries 20]
      POST /v1/tasks with bodies of SIZES MiB through urllib (which sends
      the whole body before reading the answer) and count how many tries
      see the 413 and how many see the connection reset instead.

  edge-probe.py slowbody URL KEY [--conns 50] [--seconds 30] [--interval 2]
      Open CONNS connections that send `GET /healthz` with
      `Content-Length: 100000` and then one body byte every INTERVAL
      seconds; every 2 s try `GET /v1/me` (5 s timeout). Report how many
      slow connections the server still holds open and whether /v1/me
      answered, second by second.

Standard library only, so it runs wherever python3 does.
"""
import argparse
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def oversize(args):
    for mib in [float(s) for s in args.sizes.split(",")]:
        body = b'{"title":"x","brief":"' + b"a" * int(mib * (1 << 20)) + b'"}'
        seen, resets = {}, 0
        for _ in range(args.tries):
            req = urllib.request.Request(args.url + "/v1/tasks", data=body, method="POST",
                                         headers={"Authorization": "Bearer " + args.key,
                                                  "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=30) as res:
                    seen[res.status] = seen.get(res.status, 0) + 1
            except urllib.error.HTTPError as e:
                e.read()
                seen[e.code] = seen.get(e.code, 0) + 1
            except (urllib.error.URLError, ConnectionError, OSError):
                resets += 1
        print(f"{mib:g} MiB: {seen.get(413, 0)}/{args.tries} saw 413, {resets}/{args.tries} saw a reset"
              + (f", other statuses {dict((k, v) for k, v in seen.items() if k != 413)}" if set(seen) - {413} else ""))


def slowbody(args):
    u = urllib.parse.urlsplit(args.url)
    host, port = u.hostname, u.port or 80
    conns = []
    for _ in range(args.conns):
        try:
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
            s.setblocking(False)
            conns.append(s)
        except OSError as e:
            print(f"connect failed after {len(conns)} connections: {e}")
            break
    print(f"opened {len(conns)} slow connections")
    start = time.monotonic()
    last_byte = 0.0
    while time.monotonic() - start < args.seconds:
        now = time.monotonic()
        if now - last_byte >= args.interval:
            last_byte = now
            for s in conns:
                if s.fileno() < 0:
                    continue
                try:
                    s.send(b"x")
                except OSError:
                    s.close()
        # A connection the server closed (or answered) shows up readable.
        for s in conns:
            if s.fileno() < 0:
                continue
            try:
                if s.recv(65536) == b"":
                    s.close()
            except BlockingIOError:
                pass
            except OSError:
                s.close()
        t0 = time.monotonic()
        req = urllib.request.Request(args.url + "/v1/me", headers={"Authorization": "Bearer " + args.key})
        try:
            with urllib.request.urlopen(req, timeout=5) as res:
                me = f"{res.status} in {time.monotonic() - t0:.2f} s"
        except urllib.error.HTTPError as e:
            me = f"{e.code} in {time.monotonic() - t0:.2f} s"
        except Exception as e:  # timeouts and resets are the finding
            me = f"failed after {time.monotonic() - t0:.2f} s ({type(e).__name__})"
        held = sum(1 for s in conns if s.fileno() >= 0)
        print(f"t={time.monotonic() - start:5.1f} s: server holds {held}/{len(conns)} slow connections; GET /v1/me {me}")
        sys.stdout.flush()
        time.sleep(2)
    for s in conns:
        if s.fileno() >= 0:
            s.close()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("oversize")
    o.add_argument("url")
    o.add_argument("key")
    o.add_argument("--sizes", default="1.1,5,50")
    o.add_argument("--tries", type=int, default=20)
    s = sub.add_parser("slowbody")
    s.add_argument("url")
    s.add_argument("key")
    s.add_argument("--conns", type=int, default=50)
    s.add_argument("--seconds", type=float, default=30)
    s.add_argument("--interval", type=float, default=2)
    args = p.parse_args()
    {"oversize": oversize, "slowbody": slowbody}[args.cmd](args)


if __name__ == "__main__":
    main()
