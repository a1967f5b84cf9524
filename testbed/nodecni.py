"""The node's CNI as the container runtime finds it.

NOTE: being assembled.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from testbed.tools import REPO_ROOT, ToolSet

GO_PLUGINS = ("host-local", "static", "tuning", "host-device", "ptp", "loopback")
PY_PLUGINS = {"sriov": "plugins.sriov.__main__", "recorder": "plugins.recorder", "faulty": "plugins.faulty"}
WHEREABOUTS_CRDS = (
    "whereabouts.cni.cncf.io_ippools.yaml",
    "whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml",
)


def make_cni_bin_dir(dest: Path, tools: ToolSet | None = None) -> Path:
    """Fill ``dest`` with the Go plugins that are built (symlinks) and our Python test plugins."""
    tools = tools or ToolSet()
    dest.mkdir(parents=True, exist_ok=True)
    for component, names in (("plugins", GO_PLUGINS), ("whereabouts", ("whereabouts",))):
        status = tools.status(component)
        for name in names:
            if status.usable and (status.directory / name).exists():
                (dest / name).unlink(missing_ok=True)
                (dest / name).symlink_to(status.directory / name)
    for name, module in PY_PLUGINS.items():
        wrapper = dest / name
        # plugins/ is test code, not installed: the wrapper puts the repository root on sys.path.
        wrapper.write_text(
            f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO_ROOT)!r})\nfrom {module} import main\n\nmain()\n"
        )
        wrapper.chmod(0o755)
    return dest


def ptp_host_local(subnet: str, data_dir: Path) -> dict[str, Any]:
    """A pod network plugin entry: ptp, host-local IPAM keeping its allocations in `data_dir`."""
    return {"type": "ptp", "ipam": {"type": "host-local", "subnet": subnet, "dataDir": str(data_dir)}}
