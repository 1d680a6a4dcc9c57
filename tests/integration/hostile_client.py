#!/usr/bin/env python3
"""Hostile HTTP clients for test_hostile_conn.sh: they send what a client may
send and then go away at the worst moment, with a reset (SO_LINGER {1, 0})
rather than a clean close, so the gateway's writes and reads fail while it
still holds requests.

  hostile_client.py burst HOST:PORT REQUESTS ROUNDS
      ROUNDS connections, each sending REQUESTS pipelined GET /healthz in one
      write, reading 100 bytes of the answers, then resetting.
  hostile_client.py midrequest HOST:PORT CODE CONNECTIONS
      CONNECTIONS connections at once, each in one of several ways of leaving
      mid-request: half a request head, a reservation reset before its
      answer (Redis and Kafka work in flight), pipelined reservations and
      /healthz reset after the first bytes of the answers, a body cut short.
  hostile_client.py load HOST:PORT CODE SECONDS THREADS
      THREADS threads mixing all of the above with ordinary requests for
      SECONDS seconds, or until the gateway stops accepting (SIGTERM).

For test_hostile_limits.sh, clients that stay (each prints one line of words
and numbers the test compares):

  hostile_client.py slowread HOST:PORT PID SECONDS
      One connection pipelining GET /healthz as fast as the gateway takes
      them and never reading an answer, for at most SECONDS: "closed S" when
      the gateway ended it after S seconds, "open S" when it did not; then
      the peak growth of PID's RSS (KiB) meanwhile.
  hostile_client.py idle HOST:PORT PID CONNECTIONS
      CONNECTIONS connections, each sending one request with a 6000-byte path
      and a 15000-byte body and reading its answer, then kept open and idle:
      how many got an answer, and PID's RSS growth (KiB) with all of them open.
  hostile_client.py percap HOST:PORT CONNECTIONS [busy]
      CONNECTIONS connections opened together and held, then a GET /healthz
      on each: the count of each status ("200:4 503:2"; "reset" when a
      connection ended without an answer). With busy, each has a request under
      way as soon as it is open (a request answered, then the first line of
      the next), whose rest is sent at the end; a connection refused at once
      counts with the status it got.
  hostile_client.py idleflood HOST:PORT CONNECTIONS OTHER_ADDRESS
      CONNECTIONS connections from 127.0.0.1 (fewer when the file limit,
      raised to its hard limit, is too low), opened one after the other and
      left idle; once the gateway has settled (no answer or close for 0.5 s),
      how many are still open, got 503, or were closed without an answer;
      then, with all of them held, another client from OTHER_ADDRESS asks
      GET /healthz: "opened N in S s, held H, 503 R, closed C; other STATUS
      in MS ms". Sources are bound with IP_BIND_ADDRESS_NO_PORT, so that
      the port is chosen at connect() and the ports are not exhausted.

  hostile_client.py framing HOST:PORT
      Requests whose framing RFC 9112 says to reject (whitespace before a
      header's colon, obs-fold, bare LF), each on a connection of its own:
      one line per case, "NAME STATUS closed|open" (the connection closed
      after the answer, or still open 2 s later).

Prints one summary line; exits 0 unless an argument is wrong. Whether the
gateway survived is for the test to judge (its log, /healthz, its exit status).
"""
import random
import select
import socket
import struct
import sys
import threading
import time

HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def reservation(code, order):
    body = ('{"customerId":%d,"orderId":"%s-%s","orderAmount":1000}'
            % (random.randint(1, 1 << 30), code, order)).encode()
    return (b"POST /vouchers/" + code.encode() + b"/reservations HTTP/1.1\r\n"
            b"Host: x\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


def connect(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def reset(s):
    """Closes with a reset: the gateway's next read or write on it fails."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    s.close()


def read_some(s, n):
    try:
        return s.recv(n)
    except OSError:
        return b""


def burst(addr, requests, rounds, strict=False):
    """strict: a refused connection raises (the load stops on it)."""
    done = 0
    for _ in range(rounds):
        try:
            s = connect(addr)
        except OSError:
            if strict:
                raise
            continue
        try:
            s.sendall(HEALTHZ * requests)
            read_some(s, 100)
        except OSError:
            pass
        reset(s)
        done += 1
    return done


def one_midrequest(addr, code, kind, n):
    s = connect(addr)
    try:
        if kind == 0:
            # Half a request head, then gone.
            s.sendall(b"POST /vouchers/" + code.encode() + b"/reserv")
        elif kind == 1:
            # A whole reservation, reset before its answer: the gateway is
            # waiting for Redis or Kafka when the connection goes.
            s.sendall(reservation(code, "m%d" % n))
        elif kind == 2:
            # Pipelined reservations and /healthz; the first bytes of the
            # answers are read, then the connection is reset while the rest
            # are in flight or being written.
            s.sendall(reservation(code, "p%da" % n) + HEALTHZ * 3 +
                      reservation(code, "p%db" % n) + HEALTHZ * 50)
            read_some(s, 100)
        elif kind == 3:
            # A body cut short.
            req = reservation(code, "b%d" % n)
            s.sendall(req[: len(req) - 10])
        else:
            # A reservation answered, and the connection reset while the
            # next (pipelined) one is in flight.
            s.sendall(reservation(code, "k%da" % n) + reservation(code, "k%db" % n))
            read_some(s, 1)
    except OSError:
        pass
    reset(s)


def midrequest(addr, code, connections):
    done = 0
    for n in range(connections):
        try:
            one_midrequest(addr, code, n % 5, n)
            done += 1
        except OSError:
            pass
    return done


def polite(addr, code, n):
    """An ordinary request whose answer is read in full."""
    s = connect(addr)
    try:
        s.sendall(reservation(code, "ok%d" % n) if n % 2 else HEALTHZ)
        read_some(s, 4096)
    finally:
        s.close()


def load(addr, code, seconds, threads):
    stop = time.monotonic() + seconds
    counts = [0] * threads
    refused = [0] * threads

    def worker(i):
        n = 0
        rnd = random.Random(i)
        while time.monotonic() < stop:
            n += 1
            try:
                what = rnd.randrange(4)
                if what == 0:
                    burst(addr, rnd.choice((10, 200, 1000)), 1, strict=True)
                elif what == 1:
                    one_midrequest(addr, code, rnd.randrange(5), i * 1000000 + n)
                else:
                    polite(addr, code, i * 1000000 + n)
                counts[i] += 1
                refused[i] = 0
            except OSError:
                # Refused: the gateway stopped listening (SIGTERM). Give up
                # after a few in a row.
                refused[i] += 1
                if refused[i] > 20:
                    return
                time.sleep(0.05)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts)


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def slowread(addr, pid, secs):
    before = rss_kb(pid)
    s = connect(addr)
    # A small receive window, so that the gateway's answers back up soon.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    payload = HEALTHZ * 1000
    start = time.monotonic()
    grown, state = 0, "open"
    while time.monotonic() - start < secs:
        grown = max(grown, rss_kb(pid) - before)
        try:
            s.send(payload)
            continue
        except BlockingIOError:
            pass
        except OSError:
            state = "closed"  # reset or broken pipe: the gateway closed it
            break
        # Blocked: wait (without reading) until the socket can be written or has ended.
        p = select.poll()
        p.register(s, select.POLLOUT | select.POLLERR | select.POLLHUP | select.POLLRDHUP)
        events = p.poll(100)
        if any(ev & (select.POLLERR | select.POLLHUP | select.POLLRDHUP) for _, ev in events):
            state = "closed"
            break
    took = time.monotonic() - start
    reset(s)
    return "%s %.1f %d" % (state, took, grown)


def request_answer(s, data, timeout=5):
    """Sends data, reads one answer's head and body; its status or "reset"."""
    try:
        s.settimeout(timeout)
        if data:
            s.sendall(data)
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        head, _, body = got.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 "):
            return "reset"
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(body) < length:
            chunk = s.recv(4096)
            if not chunk:
                break
            body += chunk
        return head.split(b" ")[1].decode()
    except OSError:
        return "reset"


def idle(addr, pid, n):
    body = b'{"pad":"' + b"x" * 14990 + b'"}'
    req = (b"POST /" + b"p" * 6000 + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    # One first, so that what any request needs once (a route's metric) is there before.
    warm = connect(addr)
    request_answer(warm, req)
    warm.close()
    before = rss_kb(pid)
    held, answered = [], 0
    for _ in range(n):
        s = connect(addr)
        if request_answer(s, req) != "reset":
            answered += 1
        held.append(s)
    grown = rss_kb(pid) - before
    for s in held:
        s.close()
    return "%d %d" % (answered, grown)


def percap(addr, n, busy=False):
    line = HEALTHZ[:HEALTHZ.index(b"\r\n") + 2]
    held, counts = [], {}
    for _ in range(n):
        s = connect(addr)
        if busy:
            # A whole request, then the first line of the next: once its answer
            # is here the gateway has read that line too (same read), so the
            # connection has a request under way before the next one opens.
            first = request_answer(s, HEALTHZ + line)
            if first != "200":
                counts[first] = counts.get(first, 0) + 1
                s.close()
                continue
        held.append(s)
    for s in held:
        st = request_answer(s, HEALTHZ[len(line):] if busy else HEALTHZ)
        counts[st] = counts.get(st, 0) + 1
    for s in held:
        s.close()
    return " ".join("%s:%d" % (k, counts[k]) for k in sorted(counts))


IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)


def connect_from(addr, source, timeout=5):
    """A connection from the address source (its port chosen at connect()).
    No local port free for this destination (EADDRNOTAVAIL: other tests on
    the machine hold ports too) is tried again for up to 2 s."""
    import errno
    host, port = addr.rsplit(":", 1)
    for attempt in range(100):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        s.bind((source, 0))
        s.settimeout(timeout)
        try:
            s.connect((host, int(port)))
            return s
        except OSError as e:
            s.close()
            if e.errno != errno.EADDRNOTAVAIL or attempt == 99:
                raise
            time.sleep(0.02)


def idleflood(addr, n, other):
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        soft = hard if hard != resource.RLIM_INFINITY else max(soft, n + 256)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    n = min(n, soft - 256)
    held, why = [], ""
    start = time.monotonic()
    for _ in range(n):
        try:
            held.append(connect_from(addr, "127.0.0.1"))
        except OSError as e:
            why = " (then %s)" % e
            break
    took = time.monotonic() - start
    # Settled: no socket has had anything new (an answer, a close) for 0.5 s.
    p = select.poll()
    for s in held:
        p.register(s, select.POLLIN | select.POLLRDHUP)
    ended = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        events = p.poll(500)
        if not events:
            break
        for fd, _ in events:
            p.unregister(fd)
            ended[fd] = True
    refused = closed = 0
    for s in held:
        if s.fileno() not in ended:
            continue
        try:
            s.settimeout(1)
            got = s.recv(64)
        except OSError:
            got = b""
        if got.startswith(b"HTTP/1.1 503"):
            refused += 1
        else:
            closed += 1
    t0 = time.monotonic()
    try:
        o = connect_from(addr, other)
        status = request_answer(o, HEALTHZ)
        o.close()
    except OSError as e:
        status = "refused (%s)" % e
    ms = (time.monotonic() - t0) * 1000
    line = ("opened %d in %.1f s%s, held %d, 503 %d, closed %d; other %s in %.0f ms"
            % (len(held), took, why, len(held) - refused - closed, refused, closed, status, ms))
    for s in held:
        s.close()
    return line


# The framing cases (test_hostile_limits.sh): each must get 400 and a close.
# /healthz answers 200 to a request that is read at all, body or not.
FRAMING = [
    ("te-space-colon", b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
     b"Transfer-Encoding : chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"),
    ("cl-space-colon", b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
     b"Content-Length : 2\r\n\r\n{}"),
    ("any-space-colon", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Anything : y\r\n\r\n"),
    ("te-obs-fold", b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
     b"Transfer-Encoding: identity,\r\n chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"),
    ("cl-obs-fold", b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
     b"Content-Length:\r\n\t2\r\n\r\n{}"),
    ("bare-lf", b"GET /healthz HTTP/1.1\nHost: x\n\n"),
    ("bare-lf-last-chunk", b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\n"),
]


def framing(addr):
    lines = []
    for name, req in FRAMING:
        s = connect(addr)
        status = request_answer(s, req)
        state = "open"
        try:
            s.settimeout(2)
            if s.recv(1) == b"":
                state = "closed"
        except socket.timeout:
            pass
        except OSError:
            state = "closed"
        s.close()
        lines.append("%s %s %s" % (name, status, state))
    return "\n".join(lines)


def main(argv):
    if len(argv) >= 4 and argv[1] == "burst":
        print("burst: %d connections" % burst(argv[2], int(argv[3]), int(argv[4])))
    elif len(argv) == 5 and argv[1] == "midrequest":
        print("midrequest: %d connections" % midrequest(argv[2], argv[3], int(argv[4])))
    elif len(argv) == 5 and argv[1] == "slowread":
        print(slowread(argv[2], int(argv[3]), float(argv[4])))
    elif len(argv) == 5 and argv[1] == "idle":
        print(idle(argv[2], int(argv[3]), int(argv[4])))
    elif len(argv) == 3 and argv[1] == "framing":
        print(framing(argv[2]))
    elif len(argv) in (4, 5) and argv[1] == "percap":
        print(percap(argv[2], int(argv[3]), len(argv) == 5 and argv[4] == "busy"))
    elif len(argv) == 5 and argv[1] == "idleflood":
        print(idleflood(argv[2], int(argv[3]), argv[4]))
    elif len(argv) == 6 and argv[1] == "load":
        print("load: %d actions" % load(argv[2], argv[3], float(argv[4]), int(argv[5])))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
