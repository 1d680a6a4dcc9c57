#!/usr/bin/env python3
"""Hostile clients for tests/integration/test_hostile_resources.sh: each
subcommand prints one word or number the test compares."""
import select
import socket
import sys
import time


def conn(addr, timeout=5.0):
    host, port = addr.rsplit(':', 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    return s


def get_status(addr, path, timeout=5.0):
    """One GET on a fresh connection: the status code, or 'none'."""
    try:
        s = conn(addr, timeout)
        s.sendall(f'GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n'.encode())
        data = b''
        deadline = time.time() + timeout
        while b'\r\n' not in data and time.time() < deadline:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        return data.split(b' ')[1].decode() if data.startswith(b'HTTP/1.1 ') else 'none'
    except OSError:
        return 'none'


def rss_kb(pid):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


def wait_closed(s, secs):
    """Waits up to secs for the server to end the connection, without reading
    what it sent: 'closed' or 'open'."""
    p = select.poll()
    p.register(s, select.POLLERR | select.POLLHUP | select.POLLRDHUP if hasattr(select, 'POLLRDHUP') else select.POLLERR | select.POLLHUP)
    deadline = time.time() + secs
    while time.time() < deadline:
        for _, ev in p.poll(200):
            if ev & (select.POLLERR | select.POLLHUP | getattr(select, 'POLLRDHUP', 0)):
                return 'closed'
    return 'open'


def read_until_closed(s, secs):
    """Reads until the server closes: 'closed' (EOF or reset) or 'open'."""
    s.settimeout(0.5)
    deadline = time.time() + secs
    while time.time() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            return 'closed'
        if not chunk:
            return 'closed'
    return 'open'


def flood(addr, n, conns, prefix, depth=64):
    """n reservations for n distinct codes nobody created, over conns
    keep-alive connections, depth requests pipelined on each; prints the
    count of answers by status."""
    import threading
    counts, lock = {}, threading.Lock()
    body = b'{"customerId":1,"orderId":"flood-1","orderAmount":100}'

    def worker(k):
        local = {}
        try:
            s = conn(addr, 30)
        except OSError:
            with lock:
                counts['connect'] = counts.get('connect', 0) + 1
            return
        f = s.makefile('rb')
        for start in range(k, n, conns * depth):
            batch = range(start, min(n, start + conns * depth), conns)
            req = b''.join(
                b'POST /vouchers/%s%d/reservations HTTP/1.1\r\nHost: t\r\n'
                b'Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s'
                % (prefix.encode(), i, len(body), body) for i in batch)
            try:
                s.sendall(req)
                for _ in batch:
                    status = f.readline().split(b' ')[1].decode()
                    length = 0
                    while True:
                        line = f.readline()
                        if line in (b'\r\n', b''):
                            break
                        if line.lower().startswith(b'content-length:'):
                            length = int(line.split(b':')[1])
                    f.read(length)
                    local[status] = local.get(status, 0) + 1
            except (OSError, IndexError):
                local['error'] = local.get('error', 0) + 1
                break
        s.close()
        with lock:
            for key, v in local.items():
                counts[key] = counts.get(key, 0) + v

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(' '.join(f'{key}:{counts[key]}' for key in sorted(counts)))


def probe(addr, code, secs, every=0.01):
    """Quotes code every `every` seconds for secs over one keep-alive
    connection; prints the number of answers, the count by status and the
    p99 latency in microseconds."""
    body = b'{"customerId":1,"orderAmount":100000}'
    req = (b'POST /vouchers/%s/quote HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n'
           b'Content-Length: %d\r\n\r\n%s' % (code.encode(), len(body), body))
    counts, lat = {}, []
    s, f = None, None
    end = time.time() + secs
    while time.time() < end:
        t0 = time.monotonic()
        try:
            if s is None:
                s = conn(addr, 10)
                f = s.makefile('rb')
            s.sendall(req)
            status = f.readline().split(b' ')[1].decode()
            length = 0
            while True:
                line = f.readline()
                if line in (b'\r\n', b''):
                    break
                if line.lower().startswith(b'content-length:'):
                    length = int(line.split(b':')[1])
            f.read(length)
        except (OSError, IndexError):
            status = 'error'
            s = None
        lat.append(time.monotonic() - t0)
        counts[status] = counts.get(status, 0) + 1
        time.sleep(max(0.0, every - (time.monotonic() - t0)))
    lat.sort()
    p99 = int(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e6) if lat else 0
    print(len(lat), ','.join(f'{k}:{counts[k]}' for k in sorted(counts)), p99)


def main():
    cmd, addr = sys.argv[1], sys.argv[2]
    if cmd == 'idle':  # idle ADDR N PATH: N idle sockets held open, then PATH's status
        n, path = int(sys.argv[3]), sys.argv[4]
        idle = [conn(addr) for _ in range(n)]
        print(get_status(addr, path))
        for s in idle:
            s.close()
    elif cmd == 'head':  # head ADDR PATH: a HEAD then a GET pipelined; 'ok' when HEAD got no body
        path = sys.argv[3]
        s = conn(addr)
        s.sendall((f'HEAD {path} HTTP/1.1\r\nHost: t\r\n\r\n'
                   f'GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n').encode())
        data = b''
        s.settimeout(5)
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        first_end = data.find(b'\r\n\r\n')
        rest = data[first_end + 4:] if first_end >= 0 else b''
        print('ok' if rest.startswith(b'HTTP/1.1 200') else 'body:' + repr(rest[:40]))
    elif cmd == 'idle-close':  # idle-close ADDR SECS: an idle socket is closed by the server
        s = conn(addr)
        print(read_until_closed(s, float(sys.argv[3])))
    elif cmd == 'partial-close':  # partial-close ADDR SECS: a request never finished is closed
        s = conn(addr)
        s.sendall(b'GET /healthz HTTP/1.1\r\nHost: t\r\n')
        print(read_until_closed(s, float(sys.argv[3])))
    elif cmd == 'pipeline':  # pipeline ADDR PID N SECS: N requests never read
        # prints the daemon's peak RSS growth (KiB), whether the daemon
        # stopped reading ('stopped' when not every request could be sent
        # within 3 s) and whether it closed the connection within SECS
        pid, n, secs = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
        before = rss_kb(pid)
        s = conn(addr)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        payload = b'GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n' * n
        s.setblocking(False)
        sent, deadline = 0, time.time() + 3
        while sent < len(payload) and time.time() < deadline:
            try:
                sent += s.send(payload[sent:sent + 65536])
            except BlockingIOError:
                time.sleep(0.01)
            except OSError:
                break
        # The peak over the next second, while the daemon answers what it read.
        grown, until = 0, time.time() + 1
        while time.time() < until:
            grown = max(grown, rss_kb(pid) - before)
            time.sleep(0.1)
        print(grown, 'stopped' if sent < len(payload) else 'read-all', wait_closed(s, secs))
    elif cmd == 'flood':  # flood ADDR N CONNS PREFIX: N distinct unknown codes
        flood(addr, int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    elif cmd == 'probe':  # probe ADDR CODE SECS: quotes during SECS; n, statuses, p99 us
        probe(addr, sys.argv[3], float(sys.argv[4]))
    else:
        sys.exit('unknown command ' + cmd)


if __name__ == '__main__':
    main()
