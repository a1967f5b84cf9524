"""The `cni-shim-daemon` thick-mode daemon."""

import sys


def main() -> None:
    print(
        "cni-shim-daemon: not implemented yet (tracked by the issue 'cni_shim thick mode')", file=sys.stderr
    )
    sys.exit(3)
