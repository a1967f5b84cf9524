"""The test bed's own certificate authority: serving cert, client-cert users, ServiceAccount keys.

Every run gets a fresh CA, so no two beds trust each other and nothing from a previous run can
authenticate. Keys are ECDSA P-256: cheap to generate and accepted by Go and Python ``ssl`` alike.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Long enough for a bed left up for days with `scripts/testbed up`; each run has its own CA anyway.
VALIDITY = dt.timedelta(days=30)
SERVING_DNS = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
SERVING_IPS = ("127.0.0.1", "10.0.0.1")


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


class CertificateAuthority:
    """A CA whose files live in one directory; loadable again by a later process (``open``)."""

    def __init__(self, directory: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self.directory = directory
        self._cert = cert
        self._key = key

    @property
    def cert_file(self) -> Path:
        return self.directory / "ca.crt"

    @classmethod
    def create(cls, directory: Path, common_name: str = "auto-sriov-testbed-ca") -> CertificateAuthority:
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        name = _name(common_name)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        _write_cert(directory / "ca.crt", cert)
        _write_key(directory / "ca.key", key)
        return cls(directory, cert, key)

    @classmethod
    def open(cls, directory: Path) -> CertificateAuthority:
        cert = x509.load_pem_x509_certificate((directory / "ca.crt").read_bytes())
        key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise TypeError(f"{directory}/ca.key is not an EC key; was this CA made by another tool?")
        return cls(directory, cert, key)

    def _issue(
        self,
        stem: str,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName] | None = None,
    ) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = KeyPair(self.directory / f"{stem}.crt", self.directory / f"{stem}.key")
        _write_cert(pair.cert, cert)
        _write_key(pair.key, key)
        return pair

    def issue_serving(self, stem: str = "apiserver") -> KeyPair:
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in SERVING_DNS]
        sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVING_IPS]
        return self._issue(stem, _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def issue_client(self, stem: str, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        """A client cert the apiserver maps to ``user`` (CN) in ``groups`` (O)."""
        return self._issue(stem, _name(user, groups), ExtendedKeyUsageOID.CLIENT_AUTH)


def write_service_account_keys(directory: Path) -> KeyPair:
    """The ServiceAccount token signing key (``sa.key``) and its public half (``sa.pub``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    pub = directory / "sa.pub"
    pub.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    priv = directory / "sa.key"
    _write_key(priv, key)
    return KeyPair(pub, priv)
