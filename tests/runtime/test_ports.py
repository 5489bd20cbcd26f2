"""Free ports for servers that bind later: below the range of connections' own ports."""
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
    monkeypatch.setattr(ports, "connections_range", lambda: (1500, 60999))
    assert 1500 <= ports.free_port() <= 60999
