"""Counts the RPC messages a process sends (a hook), for the message-count figures:
requests (one-way ones included) and responses."""
from __future__ import annotations

from typing import Any

_sent = {"messages": 0, "installed": False}


def install() -> None:
    from actors.rpc import RpcHook, register_hook

    class Count(RpcHook):
        def request_sent(self, envelope: Any) -> None:
            _sent["messages"] += 1

        def response_sent(self, envelope: Any) -> None:
            _sent["messages"] += 1

    if not _sent["installed"]:
        register_hook("benchmarks._counting", Count())
        _sent["installed"] = True


def messages_sent() -> int:
    return _sent["messages"]
