"""The CDI names a prepared VF is handed to the runtime under (pure): the spec kind, the device IDs
kubelet passes on, and the environment-variable infix of a device name.

The spec files themselves are written by sriov_dra.state.cdi; the checkpoint records these names, so
a record rebuilt from the API (sriov_dra.core.rebuild) names exactly what the first prepare did.
"""

from __future__ import annotations

from typing import Final

from sriov_dra.model import DRIVER_NAME

VENDOR: Final = DRIVER_NAME
CLASS: Final = "vf"
KIND: Final = f"{VENDOR}/{CLASS}"


def claim_device_id(claim_uid: str, device: str) -> str:
    return f"{KIND}={claim_uid}-{device}"


def pod_device_id(pod_uid: str) -> str:
    return f"{KIND}={pod_uid}"


def env_name(device: str) -> str:
    """The environment-variable infix of a device name (``0000-17-00-1`` -> ``0000_17_00_1``)."""
    return device.replace("-", "_")
