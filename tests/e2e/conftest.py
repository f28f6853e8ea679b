"""The end-to-end tests' fixtures: a stand-in model service on 127.0.0.1 per test."""
from __future__ import annotations

import pytest

import standin


@pytest.fixture
def service():
    state = standin.Service()
    server = standin.start(state)
    yield state
    server.shutdown()
    server.server_close()
