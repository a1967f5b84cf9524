"""The driver fault matrix (spec 17.2) as one test over one driver and one proxy: plain
``make test`` runs the fast subset, ``make faults`` every cell. The table is printed in the
terminal summary; any FAIL cell fails the test."""

from __future__ import annotations

import os
import re

import pytest

from testbed.managed_driver import IDENTITY, put_nad, sriov_config, start_agent
from tests.faults.driver_matrix import BOUNDARIES, COLUMNS, FAST, ROWS, DriverMatrix
from tests.support.faultmatrix import FAIL, NA, PASS

pytestmark = [
    pytest.mark.integration,
    pytest.mark.netns,
    pytest.mark.faults,
    pytest.mark.usefixtures("released_workloads"),
]

TITLE = "driver: boundary x fault (prepare, repair, unprepare)"
# A regex over "<row> x <column>" that narrows the run to matching cells, e.g. "EROFS".
ONLY = os.environ.get("FAULT_MATRIX_ONLY", "")


def selected(full: bool, row: str, column: str) -> bool:
    if ONLY:
        return re.search(ONLY, f"{row} x {column}") is not None
    return full or (row, column) in FAST


@pytest.mark.timeout(1800)  # every cell in one test: about 5 minutes, far more on a loaded machine
def test_driver_fault_matrix(
    managed_agent, testbed, k8s_namespace, policies, classes, fault_proxy, fault_matrix
) -> None:
    proxy = fault_proxy(identity=IDENTITY)
    put_nad(testbed, k8s_namespace, "rail-a-net", sriov_config("ai-rail-a", "192.0.2.0/24"))
    managed_agent.env["KUBECONFIG"] = str(proxy.kubeconfig)
    start_agent(managed_agent, policies)
    matrix = DriverMatrix(testbed, managed_agent, proxy, k8s_namespace, classes.name_only)
    fault_matrix.table(TITLE, ROWS, COLUMNS)
    failed = []
    for boundary in BOUNDARIES:
        for column in COLUMNS:
            if not boundary.applies(column):
                fault_matrix.record(TITLE, boundary.name, column, NA)
                continue
            if not selected(fault_matrix.full, boundary.name, column):
                continue
            problem = matrix.run(boundary, column)
            fault_matrix.record(TITLE, boundary.name, column, FAIL if problem else PASS, problem)
            if problem:
                failed.append(f"{boundary.name} x {column}: {problem}")
    assert not failed, "\n".join(failed)
