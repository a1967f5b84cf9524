"""The real node's inputs without starting anything: reproducible image tarballs that ctr can
import (docker-archive layout), and configs that parse and carry the settings this host needs."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml

from testbed import images, realnode_config


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_layer_is_reproducible_and_owned_by_root() -> None:
    entries = [
        images.Entry("bin", directory=True),
        images.Entry("bin/x", b"abc"),
        images.Entry("bin/y", link="x"),
    ]
    first, second = images.layer_tar(entries), images.layer_tar(entries)
    assert first == second
    members = _members(first)
    assert members["bin"].isdir() and members["bin/y"].issym() and members["bin/y"].linkname == "x"
    assert {(m.uid, m.gid, m.mtime) for m in members.values()} == {(0, 0, 0)}


def test_docker_archive_names_the_image_and_its_layer_digest(tmp_path: Path) -> None:
    layer = images.layer_tar([images.Entry("pause", b"\x7fELF")])
    image = images.docker_archive(
        "localhost/x/pause:t1", layer, {"Entrypoint": ["/pause"]}, tmp_path / "p.tar"
    )
    with tarfile.open(image.tarball) as tar:
        (manifest,) = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        config = json.load(tar.extractfile(manifest["Config"]))  # type: ignore[arg-type]
        stored = tar.extractfile(manifest["Layers"][0]).read()  # type: ignore[union-attr]
    assert manifest["RepoTags"] == ["localhost/x/pause:t1"] == [image.ref]
    assert stored == layer
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer).hexdigest()}"]
    assert config["os"] == "linux" and config["config"]["Entrypoint"] == ["/pause"]
    mtime = image.tarball.stat().st_mtime_ns
    images.docker_archive("localhost/x/pause:t1", layer, {"Entrypoint": ["/pause"]}, tmp_path / "p.tar")
    assert image.tarball.stat().st_mtime_ns == mtime  # unchanged content is not rewritten


@pytest.mark.skipif(not images.BUSYBOX.is_file(), reason="busybox-static is not installed (make deps)")
def test_workload_image_has_busybox_applets_and_a_bash_that_runs_sh(tmp_path: Path) -> None:
    image = images.workload_image(tmp_path)
    with tarfile.open(image.tarball) as tar:
        (manifest,) = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        layer = tar.extractfile(manifest["Layers"][0]).read()  # type: ignore[union-attr]
    members = _members(layer)
    assert members["bin/sleep"].issym() and members["bin/sh"].linkname == "busybox"
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        assert tar.extractfile("bin/bash").read() == images.BASH_SHIM  # type: ignore[union-attr]
    assert image.ref == f"{images.WORKLOAD_IMAGE}:{images.busybox_version()}"


def test_kubelet_config_parses_and_carries_the_host_settings(tmp_path: Path) -> None:
    text = realnode_config.kubelet_config(
        node_dir=tmp_path,
        runtime_socket=tmp_path / "c.sock",
        ca_file=tmp_path / "ca.crt",
        cgroup_root="/auto-sriov-n",
        port=1,
        healthz_port=2,
    )
    config = yaml.safe_load(text)
    assert config["kind"] == "KubeletConfiguration"
    assert (config["failCgroupV1"], config["cgroupDriver"], config["failSwapOn"]) == (
        False,
        "cgroupfs",
        False,
    )
    assert config["containerRuntimeEndpoint"] == f"unix://{tmp_path / 'c.sock'}"
    assert config["address"] == config["healthzBindAddress"] == "127.0.0.1" and config["readOnlyPort"] == 0
    # every setting is explained: each top-level key follows a comment line or an explained block
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line and not line.startswith((" ", "#", "apiVersion", "kind")):
            above = lines[i - 1]
            assert above.startswith("#") or (not above.startswith("#") and ":" in above), line


def test_containerd_config_is_version_4_with_the_cri_settings_this_host_needs(tmp_path: Path) -> None:
    text = realnode_config.containerd_config(
        node_dir=tmp_path,
        socket=tmp_path / "c.sock",
        cni_conf_dir=tmp_path / "net.d",
        cni_bin_dir=tmp_path / "bin",
        cdi_dir=tmp_path / "cdi",
        runc=tmp_path / "runc",
        sandbox_image="localhost/x/pause:t",
    )
    config = tomllib.loads(text)
    plugins = config["plugins"]
    runtime = plugins["io.containerd.cri.v1.runtime"]
    assert config["version"] == 4 and config["imports"] == []
    assert plugins["io.containerd.server.v1.grpc"]["address"] == str(tmp_path / "c.sock")
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["cdi_spec_dirs"] == [str(tmp_path / "cdi")]
    assert runtime["cni"]["conf_dir"] == str(tmp_path / "net.d") and runtime["cni"]["max_conf_num"] == 1
    assert runtime["containerd"]["runtimes"]["runc"]["options"]["BinaryName"] == str(tmp_path / "runc")
    assert plugins["io.containerd.cri.v1.images"]["pinned_images"]["sandbox"] == "localhost/x/pause:t"
    assert "io.containerd.nri.v1.nri" in config["disabled_plugins"]
