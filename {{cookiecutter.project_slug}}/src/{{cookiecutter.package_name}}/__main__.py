"""``python -m <this package>`` does what the console script does: see ``cli.py``."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
