"""Rolling upgrade and rollback of the installed product on two real nodes while managed Pods
are created and deleted on both (testbed/upgrade.py). The second version is this tree's images
under another tag; both DaemonSets roll one node at a time (maxUnavailable 1, maxSurge 0: see
docs/deploying.md, "Upgrades").
"""

from __future__ import annotations

import pytest

from testbed.installation import HELM_CHART, build_images
from testbed.upgrade import NEXT_TAG, RollingUpgrade

pytestmark = [pytest.mark.integration, pytest.mark.netns]


def test_rolling_upgrade_and_rollback_under_churn_on_two_nodes(stacks, installable) -> None:
    """0 failed Pod starts; residents keep interfaces, addresses, shadows and checkpoint records
    and are deleted cleanly by the other version; nothing left on either node."""
    stack = stacks.get(thick=True, install=HELM_CHART, second_node=True)
    upcoming = build_images(tag=NEXT_TAG)
    report = RollingUpgrade(stack, stack.images, upcoming, print).run()
    print(report.summary())
    assert report.ok, report.summary()
    assert report.failed_starts == 0, report.summary()
