"""The test suite's own set-up: what keeps the README's test command quick."""
from __future__ import annotations

import pytest


def test_smollm2_tests_share_one_xdist_worker(request, smollm2):
    """conftest puts every test that uses the session's SmolLM2 in one xdist group, so one worker loads it once
    (about 16 s). pytest 9.2 keeps node ids where pytest-xdist 3.8's loadgroup cannot rename them, and the groups
    were silently ignored: pyproject.toml pins pytest below 9.2, and this test says if they are ignored again."""
    if not getattr(request.config.option, "loadgroup", False):  # set in each xdist worker by --dist loadgroup
        pytest.skip("not run in pytest-xdist workers with --dist loadgroup")
    assert request.node.nodeid.endswith("@smollm2"), request.node.nodeid
