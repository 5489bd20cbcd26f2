"""Counts the RPC requests a process sends (a hook), for the message-count figures."""
from __future__ import annotations

from typing import Any

_sent = {"requests": 0, "installed": False}


def install() -> None:
    from actors.rpc import RpcHook, register_hook

    class Count(RpcHook):
        def request_sent(self, envelope: Any) -> None:
            _sent["requests"] += 1

    if not _sent["installed"]:
        register_hook("benchmarks._counting", Count())
        _sent["installed"] = True


def requests_sent() -> int:
    return _sent["requests"]
