#!/usr/bin/env python3
"""The answer's time as an oracle (issue 42, item 5), for test_hostile_oracle.sh:
reservations of codes of several classes that all answer 404 NOT_FOUND, sent
in rounds on one keep-alive connection, one request of each class a round, in
an order shuffled each round (a fixed seed): the machine's drifts, and the
cost of going first or last, fall on every class alike. Each is timed from
its write to its answer.

  hostile_timing.py HOST:PORT SAMPLES CUSTOMER NAME=CODE...
      SAMPLES rounds (a new orderId each request).

Prints one line per class after the first: "NAME median_us MEDIAN first_median_us
FIRST paired_us P z Z statuses S". P is the median, over the rounds, of the
class's time minus the first class's time in the same round: robust to the
load's swings, which hit both of a pair alike (the unknown code's 10-15 us
oracle showed there as 11 to 15). Z is the Mann-Whitney z of the class's
times against the first class's (|z| < 2: no difference this test can see;
it grows with the samples for any constant difference, so it is printed, and
the test judges P). Exits 0.
"""
import math
import random
import socket
import sys
import time


def request(code, customer, order):
    body = ('{"customerId":%d,"orderId":"%s","orderAmount":10000}' % (customer, order)).encode()
    return (b"POST /vouchers/" + code.encode() + b"/reservations HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
            + b"\r\n\r\n" + body)


def read_answer(s, buf):
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, rest = buf.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while len(rest) < length:
        rest += s.recv(65536)
    return head.split(b" ")[1].decode(), rest[length:]


def mann_whitney_z(a, b):
    both = sorted([(v, 0) for v in a] + [(v, 1) for v in b])
    ranks, i = [0.0] * len(both), 0
    while i < len(both):
        j = i
        while j + 1 < len(both) and both[j + 1][0] == both[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    r1 = sum(r for r, (_, g) in zip(ranks, both) if g == 0)
    n1, n2 = len(a), len(b)
    u = r1 - n1 * (n1 + 1) / 2
    mu, sigma = n1 * n2 / 2, math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    return (u - mu) / sigma


def main(argv):
    if len(argv) < 5:
        sys.stderr.write(__doc__)
        return 2
    host, port = argv[1].rsplit(":", 1)
    samples, customer = int(argv[2]), int(argv[3])
    classes = [a.split("=", 1) for a in argv[4:]]
    s = socket.create_connection((host, int(port)), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = {name: [] for name, _ in classes}
    statuses = {name: {} for name, _ in classes}
    buf = b""
    stamp = int(time.time() * 1000)
    order = random.Random(1)
    for i in range(-20, samples):  # 20 rounds first to warm the caches, not counted
        turn = list(classes)
        order.shuffle(turn)
        for name, code in turn:
            data = request(code, customer, "t%d-%s-%d" % (stamp, name, i))
            t0 = time.perf_counter_ns()
            s.sendall(data)
            status, buf = read_answer(s, buf)
            took = (time.perf_counter_ns() - t0) / 1000
            if i >= 0:
                times[name].append(took)
                statuses[name][status] = statuses[name].get(status, 0) + 1
    first = classes[0][0]
    med = {n: sorted(t)[len(t) // 2] for n, t in times.items()}
    for name, _ in classes[1:]:
        paired = sorted(a - b for a, b in zip(times[name], times[first]))
        print("%s median_us %.0f %s_median_us %.0f paired_us %.1f z %.2f statuses %s" % (
            name, med[name], first, med[first], paired[len(paired) // 2],
            mann_whitney_z(times[name], times[first]),
            ",".join("%s:%d" % kv for kv in sorted(statuses[name].items()))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
