#!/usr/bin/env python3
"""Parallel guessers for test_hostile_guard.sh (issue 42): many connections
from one source address, each sending one reservation of a code that does
not exist, all at once, as an attacker would to get more guesses than the
guessing limits allow (gateway/gw_guard.h, "Tries in flight").

  hostile_guess.py HOST:PORT SOURCE CONNECTIONS PREFIX CUSTOMER [honest]
      CONNECTIONS connections from address SOURCE (a 127.x.y.z of the
      loopback, so that each run has an address bucket of its own), all
      opened first; then each sends one POST /vouchers/PREFIX_N/reservations
      (a different unknown code each) in the same instant, and every answer
      is read. CUSTOMER is the customerId of every request, or 0 for a
      different one each (PREFIX's hash plus N). With "honest", every
      request reserves the code PREFIX itself (a real one: shoppers of one
      order service buying at once), each with its own orderId.

Prints the count of each status ("404:101 429:399"; "reset" for a
connection that ended without an answer, "connect" for one that could not be
opened). Exits 0 unless an argument is wrong.
"""
import asyncio
import random
import socket
import sys

IP_BIND_ADDRESS_NO_PORT = 24  # linux/in.h: the port is chosen at connect()


async def open_from(host, port, source):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Many connections from one bound address would otherwise each reserve
    # an ephemeral port at bind() and run out (issue 42's note on load tests).
    s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.bind((source, 0))
    s.setblocking(False)
    try:
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(s, (host, port)), 10)
    except (OSError, asyncio.TimeoutError):
        s.close()
        return None
    return await asyncio.open_connection(sock=s)


def reservation(code, customer, order):
    body = ('{"customerId":%d,"orderId":"%s","orderAmount":1000}' % (customer, order)).encode()
    return (b"POST /vouchers/" + code.encode() + b"/reservations HTTP/1.1\r\n"
            b"Host: x\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


async def one(conn, request, go):
    if conn is None:
        return "connect"
    reader, writer = conn
    await go.wait()
    try:
        writer.write(request)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 30)
        parts = line.split()
        return parts[1].decode() if len(parts) >= 2 else "reset"
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
        return "reset"
    finally:
        writer.close()


async def run(addr, source, n, prefix, customer, honest):
    host, port = addr.rsplit(":", 1)
    conns = await asyncio.gather(*(open_from(host, int(port), source) for _ in range(n)))
    base = random.randint(1 << 20, 1 << 40)
    go = asyncio.Event()
    tasks = [asyncio.ensure_future(one(c, reservation(prefix if honest else "%s_%d" % (prefix, i),
                                                      customer or base + i,
                                                      "%s-%d-%d" % (prefix, base, i)), go))
             for i, c in enumerate(conns)]
    await asyncio.sleep(0)  # every task waits on go: then they all write in one loop turn
    go.set()
    counts = {}
    for status in await asyncio.gather(*tasks):
        counts[status] = counts.get(status, 0) + 1
    return counts


def main(argv):
    if len(argv) not in (6, 7) or (len(argv) == 7 and argv[6] != "honest"):
        sys.stderr.write(__doc__)
        return 2
    counts = asyncio.run(run(argv[1], argv[2], int(argv[3]), argv[4], int(argv[5]),
                             len(argv) == 7))
    print(" ".join("%s:%d" % (k, counts[k]) for k in sorted(counts)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
