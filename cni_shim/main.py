"""The `cni-shim` CNI executable."""

import sys

from sriov_contract.notimpl import not_implemented


def main() -> None:
    sys.exit(not_implemented("cni-shim", "cni_shim thin mode"))
