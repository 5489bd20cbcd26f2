"""``python -m actors.debug``: see `actors.debug.cli`."""
import sys

from actors.debug.cli import main, run

if __name__ == "__main__":
    sys.exit(run(main))
