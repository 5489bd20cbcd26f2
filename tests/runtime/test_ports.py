"""Free ports for servers that bind later: below the range of connections' own ports."""
import os
import socket

import pytest

from actors.runtime.io import ports
from tests.net import bindable

pytestmark = pytest.mark.timeout(30)


def test_a_free_port_is_below_the_connections_range_bindable_and_never_repeated():
    low, _ = ports.connections_range()
    given = [ports.free_port() for _ in range(50)]
    assert len(set(given)) == 50
    assert all(1024 <= port < low for port in given)
    assert all(bindable(port) for port in given)


def test_a_port_something_listens_on_is_never_given(monkeypatch):
    port = ports.free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        # the one candidate left: the port just below the range, the listener's
        monkeypatch.setattr(ports, "connections_range", lambda: (port + 1, 60999))
        monkeypatch.setattr(ports, "_SPAN", 1)
        monkeypatch.setattr(ports, "_MIN_CHOICE", 1)
        monkeypatch.setattr(ports, "_given", set())
        assert ports.free_port() != port


def test_too_few_ports_below_the_range_means_the_kernels_choice(monkeypatch):
    low, high = ports.connections_range()
    monkeypatch.setattr(ports, "connections_range", lambda: (1500, high))
    assert low <= ports.free_port() <= high  # the kernel's, from its own range


def test_forked_children_draw_different_ports():
    readers = []
    for _ in range(3):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report one port and leave at once
            os.write(write_end, str(ports.free_port()).encode())
            os._exit(0)
        os.close(write_end)
        readers.append((pid, read_end))
    drawn = []
    for pid, read_end in readers:
        drawn.append(int(os.read(read_end, 16)))
        os.close(read_end)
        os.waitpid(pid, 0)
    assert len(set(drawn)) == 3
