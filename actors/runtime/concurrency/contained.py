"""What an error raised by code run for someone else becomes (a served request, a
future's callback, a pool task, a listener): that someone's error, or a log line,
and never the end of the thread that ran it, even a SystemExit or a
KeyboardInterrupt that the code raised itself. Only a KeyboardInterrupt on the main
thread, where Python delivers Ctrl-C, goes on up: it stops the program, as the user
asked."""
from __future__ import annotations

import threading


def escapes(exc: BaseException) -> bool:
    """Whether `exc`, caught around code run for someone else, must be raised again."""
    return isinstance(exc, KeyboardInterrupt) and \
        threading.current_thread() is threading.main_thread()
