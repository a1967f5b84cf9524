"""The host-side shim bundle and its installer, exercised for real against this machine's Python.

Dockerfile.cni runs the same two scripts in the image; here the bundle is built from the
interpreter running the tests and installed into temporary stand-ins for the host's CNI dirs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from testbed.deployment import DEPLOY_DIR
from tests.support.deploy import REPO_ROOT

BUNDLE = DEPLOY_DIR / "cni" / "bundle-host-shim"
INSTALL = DEPLOY_DIR / "cni" / "install-host-shim"
THIRD_PARTY = {"kubernetes", "yaml", "jsonschema", "pyroute2", "grpc", "google", "click", "netaddr"}
VERSION_REQUEST = {"CNI_COMMAND": "VERSION"}
UNPRIVILEGED_ROOT = (
    "setpriv",
    "--no-new-privs",
    "--bounding-set=-all",
    "--inh-caps=-all",
    "--ambient-caps=-all",
    "--",
)


@pytest.fixture(scope="session")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("host-shim")
    subprocess.run([str(BUNDLE), sys.executable, str(REPO_ROOT), str(out)], check=True, capture_output=True)
    return out


def run_shim(executable: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # A bare environment, as a container runtime gives a CNI plugin.
    return subprocess.run(
        [str(executable)],
        input='{"cniVersion": "1.0.0"}',
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_bundled_shim_answers_like_the_installed_one(bundle: Path) -> None:
    bundled = run_shim(bundle / "cni-shim", VERSION_REQUEST)
    installed = run_shim(Path(sys.executable).parent / "cni-shim", VERSION_REQUEST)
    assert bundled.returncode == 0, bundled.stderr
    assert json.loads(bundled.stdout) == json.loads(installed.stdout)
    assert "1.0.0" in json.loads(bundled.stdout)["supportedVersions"]


def test_the_host_python_environment_cannot_leak_in(bundle: Path) -> None:
    site = next(p for p in sys.path if p.endswith("site-packages"))
    env = {
        **VERSION_REQUEST,
        "PYTHONPATH": site,
        "PYTHONHOME": "/nonexistent",
        "PYTHONSTARTUP": "/nonexistent",
    }
    result = run_shim(bundle / "cni-shim", env)
    assert result.returncode == 0, result.stderr


def test_the_bundle_holds_only_the_stdlib_and_our_two_packages(bundle: Path) -> None:
    (archive,) = (bundle / "auto-sriov" / "lib").glob("python*.zip")
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
    top = {n.lstrip("./").split("/")[0] for n in names}
    assert {"cni_shim", "sriov_contract", "sriov_lib", "json", "encodings"} <= top
    assert not top & THIRD_PARTY, top & THIRD_PARTY
    assert not {"driver", "plugins", "tests"} & top
    assert not [n for n in names if n.endswith(".py")], "the shim's start-up must not compile sources"


def test_every_shared_object_resolves_inside_the_bundle(bundle: Path) -> None:
    runtime = bundle / "auto-sriov"
    lib = runtime / "lib"
    objects = [p for p in (runtime / "bin").iterdir()] + list(lib.glob("python*/lib-dynload/*.so"))
    assert len(objects) > 10
    for obj in objects:
        listing = subprocess.run(
            [str(lib / "ld.so"), "--library-path", str(lib), "--list", str(obj)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for line in listing.splitlines():
            words = line.split()
            if "=>" not in words or words[0].startswith("linux-vdso"):
                continue
            resolved = words[words.index("=>") + 1]
            assert resolved.startswith(str(lib)), f"{obj.name} loads {words[0]} from the host: {resolved}"


def install(bundle: Path, host: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOST_CNI_BIN_DIR": str(host / "bin"),
        "HOST_CNI_CONF_DIR": str(host / "conf"),
        "SHIM_BUNDLE_DIR": str(bundle),
        **extra,
    }
    # As the init container runs it: root without any capability and without privilege escalation.
    return subprocess.run(
        [*UNPRIVILEGED_ROOT, str(INSTALL)], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def host(tmp_path: Path) -> Path:
    (tmp_path / "bin").mkdir()
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "10-primary.conflist").write_text('{"cniVersion": "1.0.0", "name": "pod-net"}')
    (tmp_path / "conf" / "20-other.conf").write_text("{}")
    (tmp_path / "conf" / "05-notes.txt").write_text("not a CNI configuration")
    return tmp_path


def test_install_puts_a_working_shim_and_a_conf_naming_the_primary_network(bundle: Path, host: Path) -> None:
    result = install(bundle, host, CNI_CONF_DIR="/etc/cni/net.d", DAEMON_SOCKET_DIR="/run/cni-shim/")
    assert result.returncode == 0, result.stderr
    conf = json.loads((host / "conf" / "00-auto-sriov.conf").read_text())
    assert conf == {
        "cniVersion": "0.4.0",
        "name": "multus-cni-network",
        "type": "cni-shim",
        "clusterNetwork": "/etc/cni/net.d/10-primary.conflist",
        "daemonSocketDir": "/run/cni-shim/",
    }
    # The runtime picks the first configuration in name order: ours must come first.
    assert sorted(p.name for p in (host / "conf").glob("*.conf*"))[0] == "00-auto-sriov.conf"
    assert (host / "conf" / "00-auto-sriov.conf").stat().st_mode & 0o077 == 0
    shim = run_shim(host / "bin" / "cni-shim", VERSION_REQUEST)
    assert shim.returncode == 0, shim.stderr
    assert [p.name for p in (host / "bin").iterdir() if p.name.startswith(".")] == []


def runtimes(host: Path) -> set[str]:
    return {p.name for p in (host / "bin").glob("auto-sriov-*")}


def test_upgrades_switch_atomically_and_keep_only_the_previous_runtime(
    bundle: Path, host: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert install(bundle, host).returncode == 0
    first = runtimes(host)
    assert install(bundle, host).returncode == 0
    assert runtimes(host) == first, "reinstalling the same bundle must not copy it again"
    releases = []
    for n in (2, 3):
        release = tmp_path_factory.mktemp(f"release{n}")
        shutil.copytree(bundle, release, dirs_exist_ok=True, symlinks=True)
        (release / "auto-sriov" / "RELEASE").write_text(str(n))
        assert install(release, host).returncode == 0
        releases.append(runtimes(host))
    second, third = releases
    assert len(second) == 2 and first < second
    assert len(third) == 2 and not first & third, "the runtime two upgrades back is removed"
    wrapper = (host / "bin" / "cni-shim").read_text()
    (current,) = third - second
    assert f"RUNTIME={current}\n" in wrapper
    assert run_shim(host / "bin" / "cni-shim", VERSION_REQUEST).returncode == 0


def test_install_waits_for_a_primary_network_and_then_says_what_is_missing(
    bundle: Path, tmp_path: Path
) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "00-auto-sriov.conf").write_text("{}")
    result = install(bundle, tmp_path, PRIMARY_WAIT_SECONDS="1")
    assert result.returncode == 1
    assert "no primary CNI configuration" in result.stderr
    assert "install the cluster's default network plugin first" in result.stderr


def test_thin_mode_names_the_kubeconfig_instead_of_the_daemon_socket(bundle: Path, host: Path) -> None:
    kubeconfig = "/etc/cni/net.d/auto-sriov.d/kubeconfig"
    result = install(bundle, host, DAEMON_SOCKET_DIR="/run/cni-shim/", THIN_KUBECONFIG=kubeconfig)
    assert result.returncode == 0, result.stderr
    conf = json.loads((host / "conf" / "00-auto-sriov.conf").read_text())
    assert conf["kubeconfig"] == kubeconfig
    assert "daemonSocketDir" not in conf


REMOVE = DEPLOY_DIR / "cni" / "remove-host-shim"


def test_removal_leaves_the_node_as_before_the_install(bundle: Path, host: Path) -> None:
    before = sorted(str(p.relative_to(host)) for p in host.rglob("*"))
    assert install(bundle, host).returncode == 0
    (host / "conf" / "auto-sriov.d").mkdir()  # thin mode's credentials
    (host / "conf" / "auto-sriov.d" / "kubeconfig").write_text("{}")
    (host / "run" / "cni-shim").mkdir(parents=True)
    (host / "run" / "cni-shim" / "cni-shim.sock").write_text("")
    (host / "bin" / "host-local").write_text("another plugin")
    env = {
        "PATH": os.environ["PATH"],
        "HOST_CNI_BIN_DIR": str(host / "bin"),
        "HOST_CNI_CONF_DIR": str(host / "conf"),
        "HOST_DAEMON_SOCKET_DIR": str(host / "run" / "cni-shim"),
    }
    result = subprocess.run([str(REMOVE)], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    after = sorted(str(p.relative_to(host)) for p in host.rglob("*"))
    assert after == sorted([*before, "bin/host-local", "run"])
    again = subprocess.run([str(REMOVE)], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    missing = subprocess.run(
        [str(REMOVE)], env={**env, "HOST_CNI_BIN_DIR": str(host / "nope")}, capture_output=True, text=True
    )
    assert missing.returncode == 1 and "is not a directory" in missing.stderr
