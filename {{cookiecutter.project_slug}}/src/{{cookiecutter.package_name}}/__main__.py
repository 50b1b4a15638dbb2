"""``python -m <this package>`` does what the console script does: see ``app.py``."""

from .app import main

if __name__ == "__main__":
    raise SystemExit(main())
