"""The process's current RPC agent (one RPC world per process at a time)."""
from __future__ import annotations

from typing import Any, Optional

from .errors import RpcNotInitializedError

_agent: Optional[Any] = None


def current_agent() -> Any:
    """The running agent; RpcNotInitializedError before init_rpc or after shutdown."""
    agent = _agent
    if agent is None:
        raise RpcNotInitializedError(
            "RPC is not running in this process: call actors.init_rpc first "
            "(or again, after shutdown)")
    return agent


def agent_or_none() -> Optional[Any]:
    return _agent


def set_agent(agent: Optional[Any]) -> None:
    global _agent
    _agent = agent
