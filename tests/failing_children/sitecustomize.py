"""Makes every Python process an example starts exit with 3, after its own exit steps.

On PYTHONPATH only in the tests that check an example fails when a process of it
fails. The first process to import this is the example; it records its PID, which
its children inherit and compare with their own.
"""
import atexit
import os

_MAIN = "ACTORGRAD_FAILING_MAIN_PID"
if os.environ.setdefault(_MAIN, str(os.getpid())) != str(os.getpid()):
    # Registered first, so it runs last: the process's own exit handlers run before it.
    atexit.register(os._exit, 3)
