"""``python -m actors.launch``: see `actors.launch.cli`."""
import sys

from actors.launch.cli import main

if __name__ == "__main__":
    sys.exit(main())
