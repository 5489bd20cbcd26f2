"""Counts the messages a process sends, for the message-count figures: every request,
reply and one-way message it encodes (RPC calls, service messages such as backward
steps, store operations)."""
from __future__ import annotations

from typing import Any

_sent = {"messages": 0, "installed": False}


def install() -> None:
    from actors.runtime.protocol import envelope

    if _sent["installed"]:
        return
    encode = envelope.encode

    def counting_encode(*args: Any, **kwargs: Any) -> Any:
        _sent["messages"] += 1
        return encode(*args, **kwargs)

    envelope.encode = counting_encode
    _sent["installed"] = True


def messages_sent() -> int:
    return _sent["messages"]
