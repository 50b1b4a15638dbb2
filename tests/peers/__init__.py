"""Test peers nobody here wrote: the MCP conformance suite (Node) and the official Python SDK.

`node.py` installs Node 22 and the pinned suite (the bridge that lets the HTTP-only suite reach a
stdio server and the fixtures it calls are every generated project's own, in
`tests/conformance/`), and `project.py`
bakes a project to run them in. `tests/interop/test_conformance.py` and
`tests/interop/test_sdk_client.py` use them.
"""
