"""Test peers nobody here wrote: the MCP conformance suite (Node) and the official Python SDK.

`node.py` installs Node 22 and the pinned suite, `http_stdio_adapter.py` lets the HTTP-only suite
reach a stdio server, `conformance_tools.py` holds the fixtures the suite calls, and `project.py`
bakes a project to run them in. `tests/interop/test_conformance.py` and
`tests/interop/test_sdk_client.py` use them.
"""
