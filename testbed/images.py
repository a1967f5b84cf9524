"""Container images for the real node, built here: nothing can be pulled on these machines.

Two images, each one layer written as a docker-archive tarball (``manifest.json`` + config + layer)
that ``ctr images import`` understands:

- the sandbox image: Kubernetes' own ``pause`` (built by ``scripts/build-tools pause``) as
  ``/pause``; containerd's config pins it as the sandbox image;
- the workload image: Debian's statically linked busybox (busybox-static) with one symlink per
  applet, plus ``/bin/bash`` as a two-line script that execs busybox's sh, so the spec's example
  Pod (``/bin/bash -c "sleep infinity"``) runs unchanged.

The tarballs are byte-for-byte reproducible (fixed mtimes and owners), so re-importing one into a
containerd that already has it changes nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import subprocess
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from sriov_contract.errors import ReasonedError

BUSYBOX = Path("/bin/busybox")
PAUSE_IMAGE = "localhost/auto-sriov/pause"
WORKLOAD_IMAGE = "localhost/auto-sriov/busybox"
# busybox-static has no bash applet; the example Pod's command starts /bin/bash.
BASH_SHIM = b'#!/bin/sh\nexec /bin/sh "$@"\n'


class ImageBuildError(ReasonedError):
    """An image's input (a binary) is missing or unusable."""


@dataclass(frozen=True)
class Entry:
    path: str  # inside the image, without a leading slash
    data: bytes | None = None  # a regular file
    mode: int = 0o755
    link: str | None = None  # a symlink target
    directory: bool = False


@dataclass(frozen=True)
class Image:
    ref: str  # name:tag as the kubelet and the Pod spec name it
    tarball: Path


def goarch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def layer_tar(entries: Iterable[Entry]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.path)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = entry.mode
            if entry.directory:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry.link is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = entry.link
                info.mode = 0o777
                tar.addfile(info)
            else:
                data = entry.data or b""
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def docker_archive(ref: str, layer: bytes, config: dict[str, object], out: Path) -> Image:
    """One-layer docker-archive tarball at ``out`` (written only when its content changed)."""
    layer_id = hashlib.sha256(layer).hexdigest()
    image_config = {
        "architecture": goarch(),
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_id}"]},
        "history": [{"created_by": "testbed/images.py"}],
    }
    config_bytes = json.dumps(image_config, sort_keys=True).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": [f"{layer_id}/layer.tar"]}]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        _add(tar, config_name, config_bytes)
        _add(tar, f"{layer_id}/layer.tar", layer)
        _add(tar, "manifest.json", json.dumps(manifest).encode())
    data = buf.getvalue()
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.read_bytes() != data:
        out.write_bytes(data)
    return Image(ref, out)


def _binary(path: Path, what: str) -> bytes:
    if not path.is_file():
        raise ImageBuildError("ImageInputMissing", f"{what} {path} does not exist; run 'make deps tools'")
    return path.read_bytes()


def pause_image(pause_binary: Path, tag: str, out_dir: Path) -> Image:
    layer = layer_tar([Entry("pause", _binary(pause_binary, "the pause binary"))])
    return docker_archive(
        f"{PAUSE_IMAGE}:{tag}",
        layer,
        {"Entrypoint": ["/pause"], "User": "65535:65535"},
        out_dir / "pause.tar",
    )


def busybox_applets(busybox: Path = BUSYBOX) -> list[str]:
    out = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise ImageBuildError("ImageInputMissing", f"{busybox} --list failed: {out.stderr.strip()}")
    return sorted(set(out.stdout.split()) - {"busybox"})


def busybox_version(busybox: Path = BUSYBOX) -> str:
    """``1.35.0`` from busybox's banner (``BusyBox v1.35.0 (Debian 1:1.35.0-4+b3) multi-call...``)."""
    out = subprocess.run([str(busybox)], capture_output=True, text=True, check=False)
    words = (out.stdout + out.stderr).split()
    return words[1].removeprefix("v") if len(words) > 1 and words[0] == "BusyBox" else "unknown"


def workload_image(out_dir: Path, busybox: Path = BUSYBOX) -> Image:
    data = _binary(busybox, "busybox-static's")
    entries = [Entry(d, directory=True) for d in ("bin", "etc", "tmp", "proc", "sys", "dev", "run")]
    entries.append(Entry("bin/busybox", data))
    entries += [Entry(f"bin/{a}", link="busybox") for a in busybox_applets(busybox) if a != "bash"]
    entries.append(Entry("bin/bash", BASH_SHIM))
    # Pods resolve names through the files the kubelet mounts; these only keep `id` and `ps` sane.
    entries.append(Entry("etc/passwd", b"root:x:0:0:root:/:/bin/sh\n", mode=0o644))
    entries.append(Entry("etc/group", b"root:x:0:\n", mode=0o644))
    return docker_archive(
        f"{WORKLOAD_IMAGE}:{busybox_version(busybox)}",
        layer_tar(entries),
        {"Cmd": ["/bin/sh"], "Env": ["PATH=/bin"]},
        out_dir / "workload.tar",
    )
