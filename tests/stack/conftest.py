"""tests/stack runs only under `make test-stack` (deploy/ci/stack.sh sets DAGSPEC_STACK_TEST=1):
it needs a Docker engine and the images, and takes minutes; `make test` skips it."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("DAGSPEC_STACK_TEST") == "1":
        return
    skip = pytest.mark.skip(reason="the docker compose stack test: run `make test-stack`")
    for item in items:
        if "tests/stack/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)
