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


def main():
    cmd, addr = sys.argv[1], sys.argv[2]
    if cmd == 'idle':  # idle ADDR N PATH: N idle sockets held open, then PATH's status
        n, path = int(sys.argv[3]), sys.argv[4]
        idle = [conn(addr) for _ in range(n)]
        time.sleep(0.2)  # every idle socket accepted before the probe (not a check)
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
    elif cmd == 'pipeline':  # pipeline ADDR PID N SECS: N requests never read; RSS growth KiB and closed/open
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
        time.sleep(0.5)  # let the server read what it will (a bound on growth follows)
        grown = rss_kb(pid) - before
        print(grown, wait_closed(s, secs))
    else:
        sys.exit('unknown command ' + cmd)


if __name__ == '__main__':
    main()
