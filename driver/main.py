"""The `sriov-dra-driver` kubelet plugin daemon."""

import sys

from driver.notimpl import not_implemented


def main() -> None:
    sys.exit(not_implemented("sriov-dra-driver", "driver node agent"))
