from __future__ import annotations

import pytest

from testbed.installation import install_unavailable


@pytest.fixture(scope="session")
def installable(tool_dirs, real_kubelet) -> None:
    """The product's images and installation can run on the real kubelet here (or the test skips
    with the reason)."""
    reason = install_unavailable(tool_dirs, real_kubelet=True, thick=True)
    if reason:
        pytest.skip(f"the product cannot run as DaemonSets here: {reason}")
