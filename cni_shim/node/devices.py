"""The node's devices for cni_shim.core.deviceaccess: which names are SR-IOV VFs (sysfs) and what
the kubelet's device plugins allocated to a Pod (their checkpoint).

A VF is a PCI function whose device directory has a `physfn` link, the same test sriov-cni and
the driver make; the test bed's fake tree is shaped the same, so `sysfsRoot` points there. A
name is resolved both as Go's filepath.Join would read it (lexically) and as the kernel would
(through symlinks), so `<PF>/virtfn0` or `..` tricks name the VF they lead to. Standard library
only: a thin ADD builds this only when a selected network names a device at all.
"""

from __future__ import annotations

import os
import posixpath

from cni_shim.core import deviceaccess, kubeletcheckpoint


class SysfsDevices:
    def __init__(self, sysfs_root: str, checkpoint_file: str) -> None:
        self._root = sysfs_root
        self._checkpoint = checkpoint_file

    def _vf_at(self, base: str, name: str) -> str | None:
        if "\0" in name:
            return None
        joined = posixpath.join(base, name)
        for path in {posixpath.normpath(joined), os.path.realpath(joined)}:
            real = os.path.realpath(path)
            if os.path.lexists(posixpath.join(real, "physfn")):
                return posixpath.basename(real)
        return None

    def _netdev_with_address(self, mac: str) -> str | None:
        net = posixpath.join(self._root, "class/net")
        try:
            names = sorted(os.listdir(net))
        except OSError:
            return None
        for name in names:
            try:
                with open(posixpath.join(net, name, "address"), encoding="ascii") as fh:
                    if fh.read().strip().lower() == mac.strip().lower():
                        return name
            except (OSError, ValueError):
                continue
        return None

    def virtual_function(self, kind: str, value: str) -> str | None:
        if kind == deviceaccess.PCI:
            return self._vf_at(posixpath.join(self._root, "bus/pci/devices"), value)
        if kind == deviceaccess.HWADDR:
            found = self._netdev_with_address(value)
            return None if found is None else self.virtual_function(deviceaccess.NETDEV, found)
        if kind == deviceaccess.NETDEV:
            return self._vf_at(posixpath.join(self._root, "class/net"), posixpath.join(value, "device"))
        if kind == deviceaccess.KERNELPATH:
            # host-device's kernelpath is an absolute /sys path; read it under our root.
            rel = value[len("/sys/") :] if value.startswith("/sys/") else value.lstrip("/")
            return self._vf_at(self._root, rel)
        return None

    def allocated(self, pod_uid: str, resource_name: str) -> frozenset[str]:
        try:
            with open(self._checkpoint, "rb") as fh:
                data = fh.read()
        except OSError:
            return frozenset()  # no device plugin on this node has allocated anything
        return kubeletcheckpoint.allocated(data, pod_uid, resource_name)
