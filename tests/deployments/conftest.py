"""What the real-host modules share: moto's standalone server, as an AWS account to deploy to."""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest
from moto.server import ThreadedMotoServer


@pytest.fixture(scope="module")
def aws() -> Iterator[str]:
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    reset = http.client.HTTPConnection(host, port, timeout=30)
    reset.request("POST", "/moto-api/reset")  # moto's state lives in this process: start empty
    assert reset.getresponse().status == 200
    reset.close()
    try:
        yield f"http://{host}:{port}"
    finally:
        moto.stop()
