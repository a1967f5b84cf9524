"""Install a fast CNI launcher: `python -m cni_shim.launcher /opt/cni/bin/multus`.

The console-script wrapper starts Python with `site`, which imports every installed .pth hook
(an editable install adds an import finder); that costs more than the shim's whole VERSION
path. The shim needs only the standard library and its own packages, so the launcher runs the
interpreter with -S and puts the package root on sys.path itself. Any file name works, so it
can replace a Multus binary in place.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TEMPLATE = """#!{python} -S
import sys
sys.path.insert(0, {root!r})
from cni_shim.main import main
main()
"""


def render(python: str, root: str) -> str:
    return TEMPLATE.format(python=python, root=root)


def install(dest: Path, python: str = sys.executable) -> Path:
    root = str(Path(__file__).resolve().parent.parent)
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(render(python, root))
    tmp.chmod(0o755)
    os.replace(tmp, dest)
    return dest


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m cni_shim.launcher <destination, e.g. /opt/cni/bin/multus>")
    print(install(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
