"""Bounded text: what an error message, a log line or an error reply may echo of its input.

Input from the wire can be arbitrarily large (a 50 MB function name, a shape of a
million dimensions); quoting it whole in an error reply would send it back, several
times over. Everything here keeps a part of the text (its start; for a traceback,
its end) and says how long the whole was.
"""
from __future__ import annotations

import reprlib
from typing import Any

# What an error message quotes of a value it names, and how long the message of an
# exception may be where it is passed on (characters).
QUOTE_LIMIT = 200
MESSAGE_LIMIT = 2000

_quoting = reprlib.Repr()
_quoting.maxstring = _quoting.maxother = QUOTE_LIMIT
_quoting.maxlist = _quoting.maxtuple = _quoting.maxdict = _quoting.maxset = 16
_quoting.maxlevel = 4  # reprlib walks containers recursively: deep input stops here


def shorten(text: str, limit: int = QUOTE_LIMIT, *, keep_end: bool = False) -> str:
    """`text` if it has at most `limit` characters, else its start (or end) and its length."""
    if len(text) <= limit:
        return text
    if keep_end:
        return f"({len(text)} characters) …{text[-limit:]}"
    return f"{text[:limit]}… ({len(text)} characters)"


def quote(value: Any) -> str:
    """A repr of `value` for an error message: at most about `QUOTE_LIMIT` characters.

    A long str or bytes is cut before it is repr'd (never copied whole) and its
    length given in characters or bytes; containers show their first items.
    """
    if isinstance(value, (str, bytes, bytearray)):
        if len(value) <= QUOTE_LIMIT:
            return repr(value)
        unit = "characters" if isinstance(value, str) else "bytes"
        return f"{value[:QUOTE_LIMIT]!r}… ({len(value)} {unit})"
    try:
        return shorten(_quoting.repr(value))
    except Exception:  # noqa: BLE001 - a value whose repr fails is named by its type
        return f"<{type(value).__name__}>"


def text_of(exc: BaseException, limit: int = MESSAGE_LIMIT) -> str:
    """``str(exc)``, at most `limit` characters (shortened), even if its ``__str__`` fails."""
    try:
        return shorten(str(exc), limit)
    except Exception:  # noqa: BLE001 - an exception's own __str__ may be broken
        return f"<{type(exc).__name__} whose message cannot be shown>"
