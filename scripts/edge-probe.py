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

  edge-probe.py flood URL KEY [--sources 127.0.0.10,127.0.0.11,127.0.0.12]
                 [--seconds 40] [--hold 4000] [--path /v1/health] [--silent]
                 [--keyed-every 0.25]
      Issue 33's keyless flood: one process per source address (any of
      127.0.0.0/8 on Linux) opens connections as fast as it can, sends a
      keyless GET PATH on each (nothing, with --silent), keeps up to HOLD
      of them open and resets the oldest, reading what it was answered.
      Meanwhile, from the default address, GET /v1/me with KEY on a new
      connection every KEYED_EVERY seconds (5 s timeout), and the server's
      open files from /metrics every 2 s. Report the flood's answers by
      kind and the keyed requests' success.

Standard library only, so it runs wherever python3 does.
"""
import argparse
import collections
import multiprocessing
import re
import socket
import struct
import sys
import threading
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


def classify(data):
    """What a flood connection was answered, from the bytes it got."""
    if not data:
        return "no answer"
    status = data.split(b" ", 2)[1:2]
    status = status[0].decode(errors="replace") if status else "?"
    if status == "429":
        return "429 keyless rate" if b"without a key" in data else "429 connections"
    return status


def flooder(src, host, port, path, hold, silent, seconds, out):
    """One flooding client: connections from src for seconds."""
    request = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    held = collections.deque()
    seen = collections.Counter()
    opened = 0
    linger = struct.pack("ii", 1, 0)  # close with a reset: no TIME_WAIT

    def let_go(s):
        try:
            data = s.recv(65536)
            seen[classify(data) if data else "closed unanswered"] += 1
        except BlockingIOError:
            seen["no answer"] += 1
        except OSError:
            seen["reset"] += 1
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        s.close()

    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        s = socket.socket()
        try:
            s.bind((src, 0))
            s.settimeout(5)
            s.connect((host, port))
            if not silent:
                s.sendall(request)
            s.setblocking(False)
        except OSError:
            seen["connect failed"] += 1
            s.close()
            continue
        opened += 1
        held.append(s)
        if len(held) > hold:
            let_go(held.popleft())
    while held:
        let_go(held.popleft())
    out.put((src, opened, dict(seen)))


def flood(args):
    u = urllib.parse.urlsplit(args.url)
    host, port = u.hostname, u.port or 80
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=flooder, args=(src, host, port, args.path, args.hold, args.silent, args.seconds, out))
             for src in args.sources.split(",")]
    for p in procs:
        p.start()
    keyed = collections.Counter()
    fds = []

    def scrape():
        while any(p.is_alive() for p in procs):
            req = urllib.request.Request(args.url + "/metrics", headers={"Authorization": "Bearer " + args.key})
            try:
                with urllib.request.urlopen(req, timeout=5) as res:
                    m = re.search(rb"^process_open_fds (\S+)$", res.read(), re.M)
                    if m:
                        fds.append(float(m.group(1)))
            except Exception:
                pass
            time.sleep(2)

    threading.Thread(target=scrape, daemon=True).start()
    time.sleep(1)  # the flood gets going first
    start = time.monotonic()
    while time.monotonic() - start < args.seconds - 2:
        t0 = time.monotonic()
        req = urllib.request.Request(args.url + "/v1/me", headers={"Authorization": "Bearer " + args.key})
        try:
            with urllib.request.urlopen(req, timeout=5) as res:
                res.read()
                keyed[str(res.status)] += 1
        except urllib.error.HTTPError as e:
            keyed[str(e.code)] += 1
        except Exception as e:  # resets, disconnects and timeouts are the finding
            keyed[type(e).__name__ if not hasattr(e, "reason") else type(e.reason).__name__] += 1
        time.sleep(max(0.0, args.keyed_every - (time.monotonic() - t0)))
    total = collections.Counter()
    opened = 0
    for _ in procs:
        src, n, seen = out.get()
        opened += n
        total.update(seen)
        print(f"flood from {src}: {n} connections opened, answers {dict(sorted(seen.items()))}")
    for p in procs:
        p.join()
    ok, sent = keyed.get("200", 0), sum(keyed.values())
    print(f"flood total: {opened} connections in {args.seconds:g} s, answers {dict(sorted(total.items()))}")
    if fds:
        print(f"server open files (process_open_fds): max {max(fds):.0f}, last {fds[-1]:.0f} over {len(fds)} scrapes")
    print(f"keyed GET /v1/me: {ok}/{sent} succeeded ({100.0 * ok / max(sent, 1):.1f} %), outcomes {dict(sorted(keyed.items()))}")


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
    f = sub.add_parser("flood")
    f.add_argument("url")
    f.add_argument("key")
    f.add_argument("--sources", default="127.0.0.10,127.0.0.11,127.0.0.12")
    f.add_argument("--seconds", type=float, default=40)
    f.add_argument("--hold", type=int, default=4000)
    f.add_argument("--path", default="/v1/health")
    f.add_argument("--silent", action="store_true")
    f.add_argument("--keyed-every", type=float, default=0.25)
    args = p.parse_args()
    {"oversize": oversize, "slowbody": slowbody, "flood": flood}[args.cmd](args)


if __name__ == "__main__":
    main()
