"""VF driver binding through sysfs: no-ops, the unbind/override/bind sequence, typed failures."""

from pathlib import Path

import pytest

from sriov_dra.sysfs.vfdriver import SysfsVfDriver, VfDriverError
from tests.fakes.sysfs import add_pf

VF = "0000:17:00.1"


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    add_pf(tmp_path, "0000:17:00.0", "ens1f0", 1)
    for drv in ("vfio-pci",):
        (tmp_path / "bus/pci/drivers" / drv).mkdir(parents=True, exist_ok=True)
    return tmp_path


def test_empty_and_already_bound_are_noops(sysfs: Path) -> None:
    drv = SysfsVfDriver(sysfs)
    assert drv.current(VF) == "mlx5_core"
    assert drv.bind(VF, "") == ""
    assert drv.bind(VF, "mlx5_core") == ""
    assert drv.bind(VF, "default") == ""  # already on a kernel driver
    assert not (sysfs / "bus/pci/drivers/mlx5_core/unbind").exists()


def test_bind_writes_the_kernel_sequence_and_fails_loudly_when_the_kernel_refuses(sysfs: Path) -> None:
    drv = SysfsVfDriver(sysfs)
    with pytest.raises(VfDriverError) as err:
        drv.bind(VF, "vfio-pci")  # a plain file tree never rebinds, like a kernel refusing the device
    assert err.value.reason == "VfDriverBindFailed" and VF in err.value.message
    assert (sysfs / "bus/pci/drivers/mlx5_core/unbind").read_text() == VF
    assert (sysfs / "bus/pci/drivers/vfio-pci/bind").read_text() == VF


def test_missing_driver_directory_is_a_typed_error(sysfs: Path) -> None:
    with pytest.raises(VfDriverError) as err:
        SysfsVfDriver(sysfs).bind(VF, "igb_uio")
    assert err.value.reason == "VfDriverBindFailed"


def test_kernel_mode_checks(sysfs: Path) -> None:
    drv = SysfsVfDriver(sysfs)
    drv.verify_kernel_netdev(VF)
    link = sysfs / "bus/pci/devices" / VF / "driver"
    link.unlink()
    with pytest.raises(VfDriverError) as err:
        drv.verify_kernel_netdev(VF)
    assert err.value.reason == "VfNotKernelBound"
    link.symlink_to("../../../../bus/pci/drivers/vfio-pci")
    assert drv.current(VF) == "vfio-pci"
    with pytest.raises(VfDriverError) as err:
        drv.verify_kernel_netdev(VF)
    assert err.value.reason == "VfNotKernelBound"
