"""Numbers read from the environment (`ACTORGRAD_*`): a value that does not parse, or
is out of range, is replaced by the default with a WARNING naming it (once), never
silently."""
from __future__ import annotations

import os
from typing import Callable, TypeVar

from .log import get_logger

log = get_logger(__name__)
_warned: set = set()  # (variable, value): a setting read on every wait warns once

N = TypeVar("N", int, float)


def number_setting(variable: str, default: N, convert: Callable[[str], N],
                   valid: Callable[[N], bool], meaning: str) -> N:
    """The value of `variable` as `convert` reads it, if `valid`; else `default` (unset
    or empty: quietly). `meaning` says what a valid value is, for the warning."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is not None and valid(value):
        return value
    if (variable, text) not in _warned:
        _warned.add((variable, text))
        log.warning("setting_ignored", variable=variable, value=text, expected=meaning,
                    using=default)
    return default
