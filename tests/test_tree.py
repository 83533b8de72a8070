"""The research tree: readiness, failure propagation, and plan validation."""

from __future__ import annotations

from deep_research.core.models import PlannedTask, ResearchNode
from deep_research.core.tree import PlanPolicy, ResearchTree

POLICY = PlanPolicy(max_depth=3, max_tasks=8)


def task(tid: str, *deps: str, question: str | None = None, **extra: object) -> PlannedTask:
    fields: dict[str, object] = {
        "id": tid,
        "question": question if question is not None else f"What is node {tid}?",
        "depends_on": list(deps),
        "parallelizable": True,
        "priority": 5,
        "source_hint": "web",
        "parent_id": None,
    }
    fields.update(extra)
    return PlannedTask.model_validate(fields)


def tree_with(*tasks: PlannedTask, policy: PlanPolicy = POLICY) -> ResearchTree:
    tree = ResearchTree({})
    tree.add_plan(tasks, iteration=1, policy=policy)
    return tree


def test_ready_nodes_wait_for_all_dependencies() -> None:
    tree = tree_with(task("a"), task("b"), task("c", "a", "b"))
    assert [n.id for n in tree.ready()] == ["a", "b"]
    tree.finish(tree.nodes["a"])
    assert [n.id for n in tree.ready()] == ["b"]
    tree.finish(tree.nodes["b"])
    assert [n.id for n in tree.ready()] == ["c"]


def test_ready_orders_by_priority() -> None:
    tree = tree_with(task("low", priority=1), task("high", priority=9))
    assert [n.id for n in tree.ready()] == ["high", "low"]


def test_failure_blocks_transitive_dependents_with_reason() -> None:
    tree = tree_with(task("a"), task("b", "a"), task("c", "b"), task("d"))
    blocked = tree.fail(tree.nodes["a"], "provider exploded")
    assert sorted(blocked) == ["b", "c"]
    assert tree.nodes["a"].error == "provider exploded"
    assert tree.nodes["b"].status == "blocked"
    assert "depends on a" in (tree.nodes["b"].error or "")
    assert "depends on b" in (tree.nodes["c"].error or "")
    assert tree.nodes["d"].status == "pending"


def test_recover_interrupted_requeues_running_nodes_keeping_remote_jobs() -> None:
    tree = tree_with(task("a"))
    node = tree.nodes["a"]
    tree.start(node)
    node.remote_jobs["deep_research"] = "resp_123"
    assert tree.recover_interrupted() == ["a"]
    assert node.status == "pending"
    assert node.remote_jobs == {"deep_research": "resp_123"}


def test_cycle_is_broken_and_recorded() -> None:
    tree = ResearchTree({})
    added, issues = tree.add_plan(
        [task("a", "c"), task("b", "a"), task("c", "b")], iteration=1, policy=POLICY
    )
    assert sorted(added) == ["a", "b", "c"]
    assert any("cycle" in i.reason for i in issues)
    assert _acyclic(tree)
    assert tree.ready(), "breaking the cycle must leave something runnable"


def test_dangling_and_self_dependencies_are_removed() -> None:
    tree = ResearchTree({})
    _, issues = tree.add_plan([task("a", "ghost", "a")], iteration=1, policy=POLICY)
    assert tree.nodes["a"].depends_on == []
    reasons = " ".join(i.reason for i in issues)
    assert "unknown dependency 'ghost'" in reasons
    assert "itself" in reasons


def test_duplicate_ids_and_clashes_with_existing_nodes_are_renamed() -> None:
    tree = tree_with(task("t1"))
    added, issues = tree.add_plan(
        [task("t1", question="a new one"), task("t1", question="and another one")],
        iteration=2,
        policy=POLICY,
    )
    assert len(set(added)) == 2
    assert "t1" not in added
    assert [(i.task_id, i.action) for i in issues] == [("t1", "repaired")] * 2
    assert {tree.nodes[i].question for i in added} == {"a new one", "and another one"}


def test_empty_questions_and_too_deep_tasks_are_dropped() -> None:
    tree = tree_with(task("root"), policy=PlanPolicy(max_depth=1, max_tasks=8))
    added, issues = tree.add_plan(
        [task("blank", question="   "), task("deep", parent_id="root"), task("ok")],
        iteration=2,
        policy=PlanPolicy(max_depth=1, max_tasks=8),
    )
    assert added == ["ok"]
    dropped = {i.task_id: i.reason for i in issues if i.action == "dropped"}
    assert dropped["blank"] == "empty question"
    assert "max_depth" in dropped["deep"]


def test_dependency_on_a_dropped_task_is_removed() -> None:
    tree = ResearchTree({})
    added, issues = tree.add_plan(
        [task("gone", question=""), task("b", "gone")], iteration=1, policy=POLICY
    )
    assert added == ["b"]
    assert tree.nodes["b"].depends_on == []
    assert [(i.task_id, i.action) for i in issues] == [("gone", "dropped"), ("b", "repaired")]


def test_hostile_plan_is_capped_and_sources_forced_by_policy() -> None:
    policy = PlanPolicy(max_depth=3, max_tasks=5, allowed_sources=("internal",))
    tasks = [task(f"t{i}", priority=i % 11, question="Why is " + "x" * 10_000) for i in range(500)]
    tree = ResearchTree({})
    added, issues = tree.add_plan(tasks, iteration=1, policy=policy)
    assert len(added) == 5
    assert all(n.source_hint == "internal" for n in tree.nodes.values())
    assert all(len(n.question) <= 2000 for n in tree.nodes.values())
    assert sum(1 for i in issues if i.action == "dropped") == 495


def test_new_nodes_may_depend_on_done_nodes_but_not_failed_ones() -> None:
    tree = tree_with(task("good"), task("bad"))
    tree.finish(tree.nodes["good"])
    tree.fail(tree.nodes["bad"], "boom")
    tree.add_plan([task("next", "good", "bad")], iteration=2, policy=POLICY)
    assert tree.nodes["next"].depends_on == ["good"]
    assert [n.id for n in tree.ready()] == ["next"]


def test_children_are_linked_and_depth_follows_parent() -> None:
    tree = tree_with(task("root"))
    tree.add_plan([task("child", parent_id="root")], iteration=2, policy=POLICY)
    assert tree.nodes["root"].children == ["child"]
    assert tree.nodes["child"].depth == 2


def _acyclic(tree: ResearchTree) -> bool:
    nodes: dict[str, ResearchNode] = tree.nodes
    state: dict[str, int] = {}

    def visit(node_id: str) -> bool:
        if state.get(node_id) == 1:
            return False
        if state.get(node_id) == 2:
            return True
        state[node_id] = 1
        ok = all(visit(d) for d in nodes[node_id].depends_on)
        state[node_id] = 2
        return ok

    return all(visit(n) for n in nodes)


def test_a_cancelled_node_blocks_its_dependents_and_retry_requeues_them() -> None:
    tree = tree_with(task("a"), task("b", "a"), task("c"))
    node = tree.nodes["a"]
    node.remote_jobs["deep_research"] = "resp_1"
    assert tree.cancel(node, "cancelled by the user") == ["b"]
    assert (node.status, node.remote_jobs) == ("cancelled", {})
    assert [n.id for n in tree.with_status("cancelled")] == ["a"]
    assert [n.id for n in tree.ready()] == ["c"], "resume leaves a cancelled node alone"

    assert tree.retry_cancelled() == ["a"]
    assert tree.nodes["a"].status == tree.nodes["b"].status == "pending"
    assert tree.nodes["a"].error is None
    assert [n.id for n in tree.ready()] == ["a", "c"]
