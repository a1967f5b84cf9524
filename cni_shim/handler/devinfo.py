"""Multus's CNIDeviceInfoFile for delegates that carry device-info: written before ADD runs them,
removed whenever they are torn down (DEL, GC, a failed ADD's rollback).

Multus copies a device plugin's file there; a managed shadow's comes from the driver's frozen
device-info annotation (spec 10.4). The path is the one Multus puts in the capability args.
"""

from __future__ import annotations

from collections.abc import Iterable

from cni_shim.core import delegateplan
from cni_shim.handler.context import Context
from sriov_lib import quickjson

DEVICE_INFO_FILE = "CNIDeviceInfoFile"


def write_files(ctx: Context, delegates: Iterable[delegateplan.PlannedDelegate]) -> None:
    files = ctx.svc.device_info_files
    if files is None:
        return
    for d in delegates:
        path = d.capability_args.get(DEVICE_INFO_FILE)
        if d.device_info and isinstance(path, str):
            try:
                files.write(path, quickjson.dumps(d.device_info).encode())
            except OSError as exc:
                # As Multus: the file is auxiliary; network-status carries the same device-info.
                ctx.log.warning(f"cannot write device-info file {path}: {exc}")


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
