"""The reassignment planner: balanced replicas and preferred leaders, replication factors kept, few moves."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from moldau.cli.partitions import parse_plan, plan_json
from moldau.cli.reassignment_plan import Assignment, TopicPartition, moved_replicas, plan_reassignment


def spread(plan: Mapping[TopicPartition, Sequence[int]], brokers: Sequence[int]) -> tuple[int, int]:
    """(max - min replicas per broker, max - min preferred leaders per broker)."""
    replicas = Counter({b: 0 for b in brokers})
    leaders = Counter({b: 0 for b in brokers})
    for r in plan.values():
        replicas.update(r)
        leaders[r[0]] += 1
    return max(replicas.values()) - min(replicas.values()), max(leaders.values()) - min(leaders.values())


def check(current: Mapping[TopicPartition, Sequence[int]], brokers: Sequence[int]) -> Assignment:
    plan = plan_reassignment(current, brokers)
    assert plan.keys() == current.keys()
    for key, replicas in plan.items():
        assert len(replicas) == len(current[key]) and len(set(replicas)) == len(replicas)
        assert set(replicas) <= set(brokers)
    assert max(spread(plan, brokers)) <= 1
    return plan


def test_adding_a_fourth_broker_moves_only_its_share() -> None:
    # Six partitions of factor 3 on brokers 1-3: 18 replicas, so broker 4 should get 4 or 5 and lead 1 or 2.
    current = {("t", p): tuple((p + i) % 3 + 1 for i in range(3)) for p in range(6)}
    plan = check(current, [1, 2, 3, 4])
    load = Counter(b for r in plan.values() for b in r)
    assert load[4] in (4, 5)
    assert moved_replicas(current, plan) == load[4]
    assert Counter(r[0] for r in plan.values())[4] >= 1


def test_a_balanced_assignment_stays_as_it_is() -> None:
    current = {("t", p): ((p % 4) + 1, ((p + 1) % 4) + 1) for p in range(8)}
    assert plan_reassignment(current, [1, 2, 3, 4]) == current


def test_removing_a_broker_moves_exactly_its_replicas() -> None:
    current = {("t", p): ((p % 4) + 1, ((p + 1) % 4) + 1) for p in range(8)}
    plan = check(current, [1, 2, 3])
    assert moved_replicas(current, plan) == 4
    assert all(4 not in r for r in plan.values())


def test_preferred_leaders_are_balanced_by_reordering() -> None:
    # Every partition led by broker 1 though replicas are balanced: no data needs to move.
    current = {("t", p): (1, 2, 3) for p in range(6)}
    plan = check(current, [1, 2, 3])
    assert moved_replicas(current, plan) == 0
    assert Counter(r[0] for r in plan.values()) == {1: 2, 2: 2, 3: 2}


def test_several_topics_and_factors() -> None:
    current: dict[TopicPartition, tuple[int, ...]] = {("a", p): (1, 2) for p in range(5)}
    current.update({("b", p): (2,) for p in range(3)})
    current.update({("c", p): (1, 2, 3) for p in range(4)})
    plan = check(current, [1, 2, 3, 4, 5])
    assert {len(r) for k, r in plan.items() if k[0] == "c"} == {3}
    # Topic spread: replicas of "a" are not piled onto one new broker.
    per_broker_a = Counter(b for k, r in plan.items() if k[0] == "a" for b in r)
    assert max(per_broker_a.values()) - min(per_broker_a[b] for b in range(1, 6)) <= 2


def test_random_assignments_end_balanced() -> None:
    rng = random.Random(7)
    for _ in range(200):
        old = rng.sample(range(1, 9), rng.randint(1, 6))
        new = sorted(rng.sample(range(1, 9), rng.randint(3, 7)))
        factor = rng.randint(1, min(len(old), len(new), 3))
        current = {("t", p): tuple(rng.sample(old, factor)) for p in range(rng.randint(1, 20))}
        plan = check(current, new)
        # Never more moves than replicas outside the target plus those over their share, plus one swap each.
        assert moved_replicas(current, plan) <= sum(len(r) for r in current.values())


def test_errors() -> None:
    with pytest.raises(ValueError, match="more than"):
        plan_reassignment({("t", 0): (1, 2, 3)}, [1, 2])
    with pytest.raises(ValueError, match="no target"):
        plan_reassignment({("t", 0): (1,)}, [])


def test_plan_json_round_trip_in_kafkas_format() -> None:
    plan = {("t", 1): (3, 1), ("t", 0): (1, 2)}
    text = plan_json(plan)
    assert text.startswith('{"version": 1, "partitions": [')
    assert '"replicas": [1, 2], "log_dirs": ["any", "any"]' in text
    assert parse_plan(text) == plan
    assert parse_plan('{"version":1,"partitions":[{"topic":"x","partition":2,"replicas":[4],'
                      '"log_dirs":["any"]}]}') == {("x", 2): (4,)}


def test_command_line_checks_its_options(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from moldau.cli.main import main

    assert main(["partitions", "reassign", "--verify"]) == 1
    assert "--verify needs --plan FILE" in capsys.readouterr().err
    assert main(["partitions", "reassign", "--verify", "--cancel", "--plan", "x"]) == 1
    assert "give one of" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"partitions": [{"topic": "t"}]}')
    assert main(["partitions", "reassign", "--execute", "--plan", str(bad)]) == 1
    assert "not a reassignment plan" in capsys.readouterr().err
    plan = tmp_path / "plan.json"
    plan.write_text('{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]}')
    assert main(["partitions", "reassign", "--execute", "--plan", str(plan),
                 "--replica-alter-log-dirs-throttle", "1000"]) == 1
    assert "a plan that names log_dirs" in capsys.readouterr().err
    assert main(["partitions", "reassign", "--verify", "--plan", str(plan), "--throttle", "1000"]) == 1
    assert "--throttle goes with --execute" in capsys.readouterr().err
