"""Per-identity kubeconfigs work with the official client and with plain ``ssl``, and certs carry
the user and groups the apiserver will see."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID
from kubernetes import client
from kubernetes import config as kube_config

from testbed import kubeconfig, pki


def test_client_cert_names_user_and_groups(tmp_path: Path) -> None:
    ca = pki.CertificateAuthority.create(tmp_path)
    pair = ca.issue_client("admin", "admin", ("system:masters",))
    cert = x509.load_pem_x509_certificate(pair.cert.read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters"
    ]
    assert cert.issuer == x509.load_pem_x509_certificate(ca.cert_file.read_bytes()).subject
    assert pair.key.stat().st_mode & 0o077 == 0


def test_serving_cert_covers_loopback(tmp_path: Path) -> None:
    pair = pki.CertificateAuthority.create(tmp_path).issue_serving()
    sans = x509.load_pem_x509_certificate(pair.cert.read_bytes()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert "localhost" in sans.value.get_values_for_type(x509.DNSName)
    assert "127.0.0.1" in {str(ip) for ip in sans.value.get_values_for_type(x509.IPAddress)}


def test_reopened_ca_issues_certs_chaining_to_the_same_root(tmp_path: Path) -> None:
    pki.CertificateAuthority.create(tmp_path)
    pair = pki.CertificateAuthority.open(tmp_path).issue_client("late", "late-user")
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    ctx.load_cert_chain(str(pair.cert), str(pair.key))


def test_kubeconfig_loads_in_official_client_and_stdlib(tmp_path: Path) -> None:
    ca = pki.CertificateAuthority.create(tmp_path)
    pair = ca.issue_client("driver", "sriov-dra-driver")
    path = kubeconfig.write(
        tmp_path / "driver.json",
        kubeconfig.render("https://127.0.0.1:6443", ca.cert_file, "driver", pair.cert, pair.key),
    )
    cfg = client.Configuration()
    kube_config.load_kube_config(config_file=str(path), client_configuration=cfg)
    assert (cfg.host, cfg.cert_file, cfg.key_file, cfg.ssl_ca_cert) == (
        "https://127.0.0.1:6443",
        str(pair.cert),
        str(pair.key),
        str(ca.cert_file),
    )
    raw = json.loads(path.read_text())
    user = raw["users"][0]["user"]
    ctx = ssl.create_default_context(cafile=raw["clusters"][0]["cluster"]["certificate-authority"])
    ctx.load_cert_chain(user["client-certificate"], user["client-key"])


def test_identity_table_gives_control_plane_masters_and_test_users_nothing() -> None:
    by_name = {i.name: i for i in kubeconfig.IDENTITIES}
    assert by_name["driver"] == kubeconfig.Identity("driver", "sriov-dra-driver")
    assert by_name["cni"] == kubeconfig.Identity("cni", "cni-shim")
    assert "system:masters" in by_name["kube-controller-manager"].groups
    assert "system:masters" in by_name["kube-scheduler"].groups
