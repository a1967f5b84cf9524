"""Multus's CNIDeviceInfoFile for delegates that carry device-info: written before ADD runs them,
removed whenever they are torn down (DEL, GC, a failed ADD's rollback).

Multus copies a device plugin's file there; a managed shadow's comes from the driver's frozen
device-info annotation (spec 10.4). The path is the one Multus puts in the capability args.
"""

from __future__ import annotations

from collections.abc import Iterable

from cni_shim.core import delegateplan, netstatus
from cni_shim.core.delegates import DEVICE_INFO_FILE
from cni_shim.handler.context import Context
from sriov_lib import quickjson

TYPE_CHECKING = False  # spelled out: `typing` costs milliseconds on every CNI start

if TYPE_CHECKING:
    from cni_shim.core.results import Json
    from cni_shim.ports import DeviceInfoFiles


def write_files(ctx: Context, delegates: Iterable[delegateplan.PlannedDelegate]) -> None:
    """Each delegate's CNIDeviceInfoFile before the delegates run: a managed shadow's device-info,
    or a copy of the device plugin's file for a resourceName delegate (Multus's copy, which it
    makes before that delegate's ADD). Failures are only logged, as Multus logs them."""
    files = ctx.svc.device_info_files
    if files is None:
        return
    for d in delegates:
        path = d.capability_args.get(DEVICE_INFO_FILE)
        if not isinstance(path, str):
            continue
        info = d.device_info or _plugin_device_info(ctx, d, files)
        if info:
            try:
                files.write(path, quickjson.dumps(info).encode())
            except OSError as exc:
                # As Multus: the file is auxiliary; network-status carries the same device-info.
                ctx.log.warning(f"cannot write device-info file {path}: {exc}")


def _plugin_device_info(ctx: Context, d: delegateplan.PlannedDelegate, files: DeviceInfoFiles) -> Json | None:
    if not d.device_info_source:
        return None
    info = _load(files, d.device_info_source)
    if info is None:
        ctx.log.debug(f"no device-info copied for {d.name}: {d.device_info_source} is missing or invalid")
    return info


def read(ctx: Context, d: delegateplan.PlannedDelegate) -> Json | None:
    """The attachment's CNIDeviceInfoFile after its ADD (the device plugin's copy, or what the
    delegate wrote there), for network-status, as Multus reads it."""
    files, path = ctx.svc.device_info_files, d.capability_args.get(DEVICE_INFO_FILE)
    if files is None or not isinstance(path, str):
        return None
    return _load(files, path)


def _load(files: DeviceInfoFiles, path: str) -> Json | None:
    data = files.read(path)
    return netstatus.load_device_info(data) if data is not None else None


def remove_files(ctx: Context, delegates: Iterable[delegateplan.PlannedDelegate]) -> None:
    """Multus removes the file of every delegate whose capability args name one, errors ignored."""
    files = ctx.svc.device_info_files
    if files is None:
        return
    for d in delegates:
        path = d.capability_args.get(DEVICE_INFO_FILE)
        if isinstance(path, str) and path:
            try:
                files.remove(path)
            except OSError as exc:
                ctx.log.warning(f"cannot remove device-info file {path}: {exc}")
