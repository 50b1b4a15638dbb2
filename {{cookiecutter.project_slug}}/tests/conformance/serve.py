"""This project's server with the conformance fixtures, for the suite (`run.py` starts it).

    python tests/conformance/serve.py                 # stdio, as a host starts it
    python tests/conformance/serve.py http --port 0   # Streamable HTTP (the `http` wing)

Any arguments are the project's own command line. `fixtures.py` registers its tools, prompts
and resources with the project's registry before the server starts, so they are served beside
the project's own for this run only: the tools package never holds them, and no wheel ships them.
"""

from __future__ import annotations

import importlib
import sys

from {{ cookiecutter.package_name }}.app import main

if __name__ == "__main__":
    # Imported for what it registers, before the server reads the registry (this directory is
    # sys.path[0] for a script).
    importlib.import_module("fixtures")
    raise SystemExit(main(sys.argv[1:]))
