"""The rdma CNI plugin after sriov in a managed template (issue 32 item 4): allowed, and rendered
with the allocated VF's PCI address so it moves that VF's RDMA device into the Pod's namespace."""

import json

from tests.unit.sriov_dra.core.test_shadowconfig import PCI, SRIOV, TUNING, conflist, refused, render

RDMA = '{"type":"rdma","args":{"cni":{"debug":true}}}'


def test_rdma_after_sriov_is_rendered_with_the_allocated_vf() -> None:
    out = render(conflist(SRIOV, TUNING, RDMA))
    plugins = json.loads(out.config)["plugins"]
    assert [p["type"] for p in plugins] == ["sriov", "tuning", "rdma"]
    assert plugins[0]["deviceID"] == plugins[2]["deviceID"] == PCI
    assert "deviceID" not in plugins[1]
    assert out.config.endswith(b'{"type":"rdma","args":{"cni":{"debug":true}},"deviceID":"0000:03:00.1"}]}')


def test_rdma_pinned_to_another_vf_or_first_is_refused() -> None:
    refused(conflist(SRIOV, '{"type":"rdma","deviceID":"0000:03:00.2"}'), reason="PCIAddressMismatch")
    refused(conflist(RDMA, SRIOV))
