"""The `cni-shim-daemon` thick-mode daemon."""

import sys

from sriov_contract.notimpl import not_implemented


def main() -> None:
    sys.exit(not_implemented("cni-shim-daemon", "cni_shim thick mode"))
