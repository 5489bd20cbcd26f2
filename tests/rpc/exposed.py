"""Functions the named-call tests expose; a worker imports this with ``--import``."""

import actors

calls = {"count": 0}


@actors.expose("scale")
def scale(values, factor=2.0):
    return (values * factor).astype(values.dtype)


@actors.expose("describe")
def describe(values, *, label="x"):
    """A nested reply: arrays inside maps and lists, numbers, strings, bytes."""
    return {"label": label, "shape": list(values.shape), "parts": [values[:1], values[-1:]],
            "raw": values[:2].tobytes()}


@actors.expose("count")
def count():
    calls["count"] += 1
    return calls["count"]


@actors.expose("fails")
def fails(message):
    raise ValueError(message)


@actors.expose("unencodable")
def unencodable():
    return {1, 2, 3}


def plain_python(x):
    """Not exposed: callable only with a pickled rpc_sync."""
    return x


@actors.expose("pieces")
def pieces(count):
    """`count` byte strings: a reply of as many buffer frames."""
    return [b"x"] * count


@actors.expose("hold")
def hold(path, seconds=30.0):
    """Return "done" once file `path` exists (checked every 10 ms, for `seconds` at most);
    file `path`.started says that the call began."""
    import os
    import time

    open(f"{path}.started", "w").close()
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return "gave up"
        time.sleep(0.01)
    return "done"
