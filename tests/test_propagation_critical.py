"""Wait-propagation graph and critical path on hand-computed timelines (issue 14)."""

from __future__ import annotations

import networkx as nx
import pytest

from waitlab.models.analysis.critical_path import critical_path
from waitlab.models.analysis.propagation import propagation_graph, root_causes, write_graphml
from waitlab.models.analysis.waitstates import make_events, wait_states

X = 0.75


def chain(n: int, x: float):
    """Rank 0 computes 1 + x, the others 1; then 0 -> 1 -> ... -> n-1 pass a message (zero transfer time)."""
    rank, op, enter, exit_, match, done, peer = [], [], [], [], [], [], []

    def add(r, o, a, b, m=-1, p=-1):
        rank.append(r), op.append(o), enter.append(a), exit_.append(b), match.append(m), peer.append(p)
        done.append(len(rank) - 1 if o in ("send", "recv") else -1)

    for r in range(n):
        add(r, "compute", 0.0, 1.0 + (x if r == 0 else 0.0))
        if r > 0:
            add(r, "recv", 1.0, 1.0 + x, m=r - 1, p=r - 1)
        if r < n - 1:
            add(r, "send", 1.0 + x, 1.0 + x, m=r, p=r + 1)
    return make_events(rank=rank, op=op, enter=enter, exit=exit_, match=match, done=done, peer=peer)


def test_late_sender_chain_critical_path_is_the_late_ranks_work():
    ev = chain(3, X)
    cp = critical_path(ev, wait_states(ev))
    assert cp.makespan == pytest.approx(1 + X)
    assert cp.length == pytest.approx(cp.makespan)
    busy = cp.by_region_rank.set_index(["rank", "region"])["seconds"]
    assert busy[(0, "compute")] == pytest.approx(1 + X)  # the extra work of rank 0 is on the path
    assert cp.by_rank.sum() == pytest.approx(1 + X)
    # imbalance of compute: on the path 1 + X, mean per rank (1 + X + 1 + 1) / 3
    row = cp.by_region.set_index("region").loc["compute"]
    assert row["imbalance"] == pytest.approx(1 + X - (3 + X) / 3)


def barrier_steps(x: float, y: float):
    """Two steps of compute + barrier on 3 ranks; rank 0 is late by x in step 0, rank 2 by y in step 1."""
    t1 = 1 + x
    rows = [  # (rank, op, enter, exit, match)
        (0, "compute", 0, 1 + x, -1), (0, "barrier", t1, t1, 0), (0, "compute", t1, t1 + 1, -1),
        (0, "barrier", t1 + 1, t1 + 1 + y, 1),
        (1, "compute", 0, 1, -1), (1, "barrier", 1, t1, 0), (1, "compute", t1, t1 + 1, -1),
        (1, "barrier", t1 + 1, t1 + 1 + y, 1),
        (2, "compute", 0, 1, -1), (2, "barrier", 1, t1, 0), (2, "compute", t1, t1 + 1 + y, -1),
        (2, "barrier", t1 + 1 + y, t1 + 1 + y, 1),
    ]
    ev = make_events(rank=[r[0] for r in rows], op=[r[1] for r in rows], enter=[float(r[2]) for r in rows],
                     exit=[float(r[3]) for r in rows], match=[r[4] for r in rows])
    ev["step"] = [0, 0, 1, 1] * 3
    return ev


def test_critical_path_jumps_to_the_latest_rank_of_each_step():
    x, y = 0.5, 0.25
    ev = barrier_steps(x, y)
    cp = critical_path(ev, wait_states(ev))
    assert cp.length == pytest.approx(2 + x + y) and cp.makespan == pytest.approx(2 + x + y)
    assert cp.by_rank.to_dict() == pytest.approx({0: 1 + x, 2: 1 + y})
    one = critical_path(ev, wait_states(ev), steps=(1, 1))
    assert one.length == pytest.approx(1 + y) and one.by_rank.to_dict() == pytest.approx({2: 1 + y})


def test_propagation_graph_of_a_chain(tmp_path):
    ev = chain(4, X)
    waits = wait_states(ev)
    g = propagation_graph(ev, waits)
    kinds = nx.get_node_attributes(g, "kind")
    assert sorted(kinds.values()) == ["delay", "wait", "wait", "wait"]
    delay = next(n for n, k in kinds.items() if k == "delay")
    assert g.nodes[delay]["rank"] == 0 and g.nodes[delay]["delay"] == pytest.approx(X)
    # rank 3 waits because of rank 2's wait, which waits because of rank 1's, caused by rank 0's extra work
    by_rank = {g.nodes[n]["rank"]: n for n, k in kinds.items() if k == "wait"}
    assert list(nx.dfs_preorder_nodes(g, by_rank[3])) == [by_rank[3], by_rank[2], by_rank[1], delay]
    assert all(d["relation"] == "caused_by" for *_, d in g.edges(data=True))
    # the delay explains its own wait and the two it propagated to: X + X + X (CWP-DM short X + long 2X)
    rc = root_causes(g)
    assert rc["explained"].tolist() == pytest.approx([3 * X])
    path = tmp_path / "g.graphml"
    write_graphml(g, path)
    back = nx.read_graphml(path)
    assert back.number_of_nodes() == 4 and back.number_of_edges() == 3
    assert float(back.nodes[delay]["delay"]) == pytest.approx(X)


def test_no_waits_gives_an_empty_graph_and_a_path_on_one_rank():
    ev = make_events(rank=[0, 1], op=["compute", "compute"], enter=[0.0, 0.0], exit=[2.0, 1.0])
    assert propagation_graph(ev, wait_states(ev)).number_of_nodes() == 0
    cp = critical_path(ev, wait_states(ev))
    assert cp.length == 2.0 and cp.by_rank.to_dict() == {0: 2.0}
