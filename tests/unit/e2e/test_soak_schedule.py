"""The soak's seeded kill schedule (testbed/soak.py): what a seed names must be the same every
time, cover every kind and both nodes, and leave the end of the run alone."""

from __future__ import annotations

from collections import Counter

from testbed import soak


def test_a_seed_names_one_schedule_and_another_seed_another() -> None:
    config = soak.Config(seed=7)
    assert soak.schedule(config) == soak.schedule(soak.Config(seed=7))
    assert soak.schedule(config) != soak.schedule(soak.Config(seed=8))


def test_every_kind_dies_about_equally_often_on_both_nodes_before_the_last_tenth() -> None:
    config = soak.Config(seed=20, pods=200, kills=15)
    kills = soak.schedule(config)
    assert Counter(k.kind for k in kills) == {"driver": 5, "daemon": 5, "kubelet": 5}
    assert {k.node for k in kills} == {0, 1}
    assert [k.after_pods for k in kills] == sorted(k.after_pods for k in kills)
    assert all(1 <= k.after_pods <= 180 and 0.0 <= k.delay_s <= 4.0 for k in kills)


def test_a_given_seed_is_kept_and_a_missing_one_is_drawn() -> None:
    assert soak.seed_from("4242") == 4242
    assert soak.seed_from(None) > 0 and soak.seed_from("") > 0


def test_the_other_events_join_the_schedule_and_leave_a_seeds_kills_as_they_were() -> None:
    kills_only = soak.Config(seed=20, pods=200, kills=15)
    config = soak.Config(
        seed=20, pods=200, kills=15, reboots=20, link_flaps=3, apiserver_restarts=2, cache_deletions=4
    )
    schedule = soak.schedule(config)
    assert Counter(k.kind for k in schedule) == {
        "driver": 5,
        "daemon": 5,
        "kubelet": 5,
        "reboot": 20,
        "linkflap": 3,
        "apiserver": 2,
        "cachedel": 4,
    }
    assert [k for k in schedule if k.kind in soak.KINDS] == soak.schedule(kills_only)
    assert {k.node for k in schedule if k.kind == "reboot"} == {0, 1}
    assert [k.after_pods for k in schedule] == sorted(k.after_pods for k in schedule)
    assert all(1 <= k.after_pods <= 180 for k in schedule)
