"""Fixtures for the fault-injecting API proxy (``testbed.faultproxy``) in front of the real bed.

- ``fault_proxy`` (function): a factory, ``fault_proxy(identity="driver")`` -> a running
  ``FaultProxy`` whose ``.kubeconfig`` authenticates upstream as that bed identity. Add faults
  with ``.add_rule(faults.conflict(), verb="create", resource="configmaps", times=1)`` (testbed/faults.py),
  inspect ``.requests``, reset with ``.clear()``. Every proxy is closed after the test.
- ``fault_proxy_serving_cert`` (session): the proxy's serving cert, issued by the bed's CA so the
  bed's ``ca_file`` verifies it and the generated kubeconfig needs nothing new.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from testbed import pki
from testbed.faultproxy import FaultProxy

if TYPE_CHECKING:
    from testbed.bed import TestBed


@pytest.fixture(scope="session")
def fault_proxy_serving_cert(testbed: TestBed) -> pki.KeyPair:
    ca = pki.CertificateAuthority.open(testbed.state.pki_dir)
    return ca.issue_serving(stem=f"faultproxy-{secrets.token_hex(4)}")


@pytest.fixture
def fault_proxy(
    testbed: TestBed, fault_proxy_serving_cert: pki.KeyPair, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., FaultProxy]]:
    started: list[FaultProxy] = []

    def start(identity: str = "driver") -> FaultProxy:
        workdir = tmp_path_factory.mktemp("faultproxy")
        proxy = FaultProxy(
            testbed.kubeconfig_for(identity),
            fault_proxy_serving_cert.cert,
            fault_proxy_serving_cert.key,
            workdir / f"{identity}.json",
            identity=identity,
        )
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        proxy.close()
