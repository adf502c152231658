"""Round 24 perturbation fixes (tester t5): the write-back's event kind, condition C's receive event, the docs of
``injected_seconds.flush``, and four inputs that ran silently against the documented rules.

Every expected value is computed by hand in the comments (none is read back from waitlab's own output).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import waitlab
from waitlab.errors import InputError
from waitlab.experiments.perturbation import parse_perturbation
from waitlab.experiments.schema import validate_section
from waitlab.models.analysis.waitstates import make_events
from waitlab.models.columns import frame
from waitlab.models.ops import CAUSE_KINDS, OpBuilder
from waitlab.models.perturb.condition_c import check_condition_c
from waitlab.models.perturb.insertion import Insertions, apply_insertions, concat, key
from waitlab.models.perturb.stage import SPILL_KINDS
from waitlab.simulator.timeline import build_events

DOC = Path(__file__).resolve().parents[1] / "docs" / "perturbation.md"

HEAD = """[scenario]
name = "{name}"
ranks = 4
seed = 2

[platform]
name = "dawning_5000a"

[application]
kind = "stencil"
dims = 1
"""

#: tester t5's s9.toml: 4-rank 1-D stencil, records with their payload, swapout_f after every collective with a
#: page-cache write-back of 1 us per flushed byte
S9 = HEAD.format(name="s9") + """steps = 3
halo_bytes = 1000
compute_seconds = 0.01

[instrumentation]
events = "mpi"
record_bytes = 100
payload = 1.0
fixed_cost = 1e-4
copy_cost = 1e-7

[tracing]
policy = "swapout_f"
buffer_bytes = 5000
tau = 0.01
writeback_cost = 1e-6
"""

#: tester t5's s1.toml: periodic 1-D stencil, every rank records the same 6 calls per step at 1 ms each
S1 = HEAD.format(name="s1") + """periodic = true
steps = 3
halo_bytes = 1024
compute_seconds = 0.01

[instrumentation]
events = "mpi"
record_bytes = 64
fixed_cost = 0.001
copy_cost = 0.0
"""

#: tester t5's s7.toml: the padded_sync example of docs/perturbation.md
S7 = HEAD.format(name="s7") + """steps = 6
halo_bytes = 1024

[instrumentation]
events = "mpi"
record_bytes = 64
fixed_cost = 1e-6

[tracing]
policy = "padded_sync"
buffer_bytes = 1000
"""

#: tester t5's t3.toml: pingpong, per-rank flushes of a 2000-byte buffer, write-back 1 us per byte
T3 = """[scenario]
name = "t3"
ranks = 2
seed = 1

[platform]
name = "okita_myrinet"

[application]
kind = "pingpong"
steps = 4
message_bytes = 1000
compute_seconds = 0.001

[instrumentation]
events = "mpi"
record_bytes = 100
payload = 0.5
fixed_cost = 0.001
copy_cost = 1e-6
where = "after"

[tracing]
policy = "per_rank"
buffer_bytes = 2000
writeback_cost = 1e-6
"""

PINGPONG = """[scenario]
name = "bad"
ranks = 2
seed = 1

[platform]
name = "okita_myrinet"

[application]
kind = "pingpong"
steps = 4
message_bytes = 1000
compute_seconds = 0.001
"""


def _run(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / f"{name}.toml").write_text(text)
    out = tmp_path / f"r_{name}"
    waitlab.run(tmp_path / f"{name}.toml", out, chrome=True)
    return out


# ---- F1: the write-back is kind flush in the event table, as in the ledger -------------------------------------


def test_write_back_rows_are_kind_flush_in_the_event_table() -> None:
    # rank 0: compute 1 s, then a 0.5 s record (kind overhead), a flush and its 0.25 s write-back (both booked as
    # flush), then the barrier; rank 1: compute 1 s, barrier
    b = OpBuilder(2)
    b.add("compute", [0, 1], value=1.0)
    b.add("barrier", [0, 1])
    ops = b.build()
    parts = [
        Insertions.make(rank=[0], key=[key(1, 0)], tie=0, action="overhead", value=[0.5], kind="overhead",
                        ref_row=[0]),
        Insertions.make(rank=[0], key=[key(1, 0)], tie=2, action="flush", value=[100.0], value2=[1000.0],
                        kind="flush", ref_row=[0]),
        Insertions.make(rank=[0], key=[key(1, 0)], tie=4, action="overhead", value=[0.25], kind="flush",
                        ref_row=[0]),
    ]
    new, _ = apply_insertions(ops, concat(parts))
    # times by hand: compute [0, 1], record [1, 1.5], flush 100 B at 1000 B/s [1.5, 1.6], write-back [1.6, 1.85]
    t_enter = np.array([0.0, 1.0, 1.5, 1.6, 1.85, 0.0, 1.85])
    t_exit = np.array([1.0, 1.5, 1.6, 1.85, 1.85, 1.0, 1.85])
    ev = frame(build_events(new, t_enter, t_exit))
    got = list(zip(ev["op"].astype(str), ev["kind"].astype(str), strict=True))
    assert got[:5] == [("compute", "compute"), ("overhead", "overhead"), ("flush", "flush"),
                       ("overhead", "flush"), ("barrier", "mpi")]
    # the ledger books the record as overhead, the flush and the write-back as flush
    assert [CAUSE_KINDS[k] for k in new.ledger.kind] == ["overhead", "flush", "flush"]
    # spilling only: rank 0 has 0.1 + 0.25 = 0.35 s before the barrier, rank 1 none (without the fix: 0.1 s)
    rep = check_condition_c(ev, kinds=SPILL_KINDS)
    assert rep.violating_collectives == 1 and rep.max_difference == pytest.approx(0.35)


@pytest.mark.simgrid
def test_swapout_f_write_back_breaks_spilling_condition_c(tmp_path: Path) -> None:
    out = _run(tmp_path, "s9", S9)
    ev = pd.read_parquet(out / "events.parquet")
    # records per step: an edge rank (0, 3) writes irecv and isend of 100 + 1000 B, waitall 100 B and the
    # allreduce's 100 + 8 B: 2408 B; an inner rank (1, 2) two of each halo record: 4 x 1100 + 208 = 4608 B.
    # f after every allreduce writes them, then the write-back costs 1e-6 s per byte: 0.002408 / 0.004608 s
    wb = ev[(ev["op"] == "overhead") & (ev["kind"] == "flush")]
    assert len(wb) == 12  # 4 ranks x 3 f calls
    dur = (wb["exit"] - wb["enter"]).to_numpy()
    edge = wb["rank"].isin([0, 3]).to_numpy()
    assert dur[edge] == pytest.approx([0.002408] * 6, abs=1e-9)
    assert dur[~edge] == pytest.approx([0.004608] * 6, abs=1e-9)
    # f itself lasts tau = 0.01 s on every rank (flush + pad): equal.  The write-back differs by 2.2 ms per f:
    # after f 0 inner ranks are 2.2 ms ahead, after f 1 4.4 ms.  Steps 1 and 2: messages 0<->1 and 2<->3
    # (4 per step) break C: 8 of 18; allreduces 1 and 2: 2 of 3; the largest difference 0.0044 s
    rep = check_condition_c(ev, kinds=SPILL_KINDS)
    assert (rep.violating_pairs, rep.pairs, rep.violating_collectives, rep.collectives) == (8, 18, 2, 3)
    assert rep.max_difference == pytest.approx(0.0044, abs=1e-9)
    assert "condition C (spilling only: swap, flush, pads): violated by 8/18 pairs and 2/3 collectives" in \
        (out / "perturbation.txt").read_text()
    # trace.json shows the same kind (its category)
    trace = json.loads((out / "trace.json").read_text())["traceEvents"]
    cats = {(e["name"], e.get("cat")) for e in trace if e.get("ph") == "X" and e["name"] == "overhead"}
    assert cats == {("overhead", "overhead"), ("overhead", "flush")}


# ---- F2: a message is sent at the send's post and received at the receive's completion ----------------------


def test_receive_is_paired_at_its_completion() -> None:
    # rank 0: 1 ms record, isend (message 0) at t = 1 ms, wait; rank 1: irecv (message 0), its 1 ms record, wait.
    # o before the isend: 1 ms; before the irecv's post: 0; before the wait completing it: 1 ms.
    ev = make_events(rank=[0, 0, 0, 1, 1, 1], op=["overhead", "isend", "wait", "irecv", "overhead", "wait"],
                     enter=[0.0, 0.001, 0.001, 0.0, 0.0, 0.001], exit=[0.001, 0.001, 0.001, 0.0, 0.001, 0.001],
                     match=[-1, 0, -1, 0, -1, -1], done=[-1, 2, -1, 5, -1, -1],
                     kind=["overhead", "mpi", "mpi", "mpi", "overhead", "mpi"])
    ev["seq"] = [0, 1, 2, 0, 1, 2]
    rep = check_condition_c(ev)
    # paired with the wait: 1 ms = 1 ms, C holds (the irecv's post would give 1 ms against 0)
    assert rep.pairs == 1 and rep.holds
    # a blocking recv is its own completion (done = itself), and a row without done (-1) pairs at itself
    for done in (3, -1):
        ev2 = ev.assign(op=pd.Categorical(["overhead", "isend", "wait", "recv", "overhead", "wait"]),
                        done=[-1, 2, -1, done, -1, -1])
        rep2 = check_condition_c(ev2)
        assert (rep2.violating_pairs, rep2.max_difference) == (1, pytest.approx(0.001))
        assert (rep2.first["rank"], rep2.first["op"]) == (0, "isend")


def test_receiver_delayed_by_records_after_the_post_is_named_at_its_wait() -> None:
    # rank 0 sends to rank 1: isend, then 2 ms of records, wait; rank 1: irecv, 3 ms of records, wait.
    # The isend follows 0 s, the wait completing the irecv 3 ms: C breaks by 3 ms, named at rank 1's wait (seq 2)
    ev = make_events(rank=[0, 0, 0, 1, 1, 1], op=["isend", "overhead", "wait", "irecv", "overhead", "wait"],
                     enter=[0.0, 0.0, 0.002, 0.0, 0.0, 0.003], exit=[0.0, 0.002, 0.002, 0.0, 0.003, 0.003],
                     match=[0, -1, -1, 0, -1, -1], done=[2, -1, -1, 5, -1, -1],
                     kind=["mpi", "overhead", "mpi", "mpi", "overhead", "mpi"])
    ev["seq"] = [0, 1, 2, 0, 1, 2]
    rep = check_condition_c(ev)
    assert (rep.violating_pairs, rep.max_difference) == (1, pytest.approx(0.003))
    assert (rep.first["rank"], rep.first["seq"], rep.first["op"], rep.first["peer_rank"]) == (1, 2, "wait", 0)


@pytest.mark.simgrid
def test_identical_recording_in_a_periodic_stencil(tmp_path: Path) -> None:
    out = _run(tmp_path, "s1", S1)
    ev = pd.read_parquet(out / "events.parquet")
    # per step every rank: irecv, irecv, isend, isend, waitall, allreduce, each followed by its 1 ms record.
    # Within a step the isends follow 2 and 3 records, the waitall 4: every message breaks C by 2 or 1 ms
    # (4 ranks x 2 messages x 3 steps = 24 of 24, max 0.002 s; pairing the irecv's post gave up to 3 ms).
    # The allreduces follow 6 records per step on every rank: 0 of 3.
    rep = check_condition_c(ev)
    assert (rep.violating_pairs, rep.pairs, rep.violating_collectives, rep.collectives) == (24, 24, 0, 3)
    assert rep.max_difference == pytest.approx(0.002, abs=1e-9)
    diffs = sorted(set(np.round(rep.violations["difference"].to_numpy(), 9)))
    assert diffs == [0.001, 0.002]
    # the receiving side is named at its waitall (it has the larger prefix sum)
    assert set(rep.violations["op"].astype(str)) == {"waitall"}
    # the receiver is delayed more than the sender, which shortens waits only: nothing moves by 1e-6 s
    dist = pd.read_parquet(out / "distortion.parquet")
    assert float(dist["distortion"].abs().max()) < 1e-6


@pytest.mark.simgrid
def test_padded_sync_example_of_the_docs(tmp_path: Path) -> None:
    out = _run(tmp_path, "s7", S7)
    ev = pd.read_parquet(out / "events.parquet")
    # buffer 1000 B, 64-byte records; an inner rank writes 6 per step (384 B), an edge rank 4 (256 B).
    # Inner ranks 1, 2 overflow at their 16th record (step 2, right after the second isend, before its record);
    # edge ranks 0, 3 at theirs (step 3, after the allreduce, before its record): 4 individual flushes of
    # 15 x 64 = 960 B each.  At the step-4 allreduce an inner buffer passed 800 B: all 4 flush, padded
    # (4 synchronised).  Spilling prefix sums: step 2: inner waitalls follow the flush F, every send's post does
    # not: 0->1, 2->1, 1->2, 3->2 break C (4); step 3: inner ranks F, edge 0: 0<->1 and 2<->3 (4); from step 4
    # on all equal.  8 of 36 pairs (the irecv posts gave 4); allreduces 2 and 3: 2 of 6
    rep = check_condition_c(ev, kinds=SPILL_KINDS)
    assert (rep.violating_pairs, rep.pairs, rep.violating_collectives, rep.collectives) == (8, 36, 2, 6)
    spill = json.loads((out / "perturbation.json").read_text())["spill"]
    assert (spill["synchronized_flushes"], spill["individual_flushes"]) == (4, 4)
    # the docs quote these numbers
    assert ("4 synchronised and 4 individual flushes, C (spilling only) violated by 8 of 36 pairs and 2 of 6 "
            "collectives") in DOC.read_text()


def test_docs_explain_the_pairing_and_the_all_overhead_violations() -> None:
    text = DOC.read_text()
    assert "the completion of its receive" in text
    assert "whose number differs\nbetween ranks with 2, 3 and 4 neighbours" not in text  # the tester's counter-example
    assert "all 80 messages\nbetween the interior ranks 5, 6, 9 and 10" in text


# ---- F3: injected_seconds.flush = writing + pads + write-back -----------------------------------------------


@pytest.mark.simgrid
def test_flush_seconds_include_the_write_back(tmp_path: Path) -> None:
    out = _run(tmp_path, "t3", T3)
    rep = json.loads((out / "perturbation.json").read_text())
    # a send and a recv per step, records of 100 + 0.5 x 1000 = 600 B, 8 per rank; 3 fit in 2000 B, so each rank
    # flushes 1800 B before its 4th and its 7th record: 4 flushes, each 1 ms latency + 1800 / 6.43298e8 s (the
    # platform's disk) = 0.0010027981 s: 0.004011 s written, no pads; the write-back 4 x 1800 B x 1e-6 = 0.0072 s
    assert rep["spill"]["flush_seconds"] == pytest.approx(0.004011, abs=1e-6)
    assert rep["spill"]["pad_seconds"] == 0.0
    assert rep["injected_seconds"]["flush"] == pytest.approx(0.004011 + 0.0072, abs=1e-6)
    text = DOC.read_text()
    assert "`injected_seconds.flush` of `perturbation.json` is the writing, the pads and the write-back" in text
    assert "is the writing plus the pads" not in text


# ---- F4: inputs that ran silently ----------------------------------------------------------------------------


@pytest.mark.parametrize(("section", "table", "field", "problem", "fix"), [
    ("instrumentation", {"events": "none", "only": ["recv"]}, "instrumentation.only",
     "events = \"none\" records nothing", 'set events = "mpi"'),
    ("tracing", {"policy": "per_rank", "buffer_bytes": 100.5}, "tracing.buffer_bytes",
     "100.5 bytes is not a whole number", "set buffer_bytes = 100 "),
    ("tracing", {"policy": "keep", "memory": 2000.25}, "tracing.memory", "2000.25 bytes is not a whole number",
     "set memory = 2000 "),
])
def test_contradictory_sections_are_refused(section: str, table: dict[str, object], field: str, problem: str,
                                            fix: str) -> None:
    with pytest.raises(InputError) as exc:
        validate_section(section, table, "s.toml")
    assert exc.value.field == field and problem in exc.value.problem and fix in exc.value.fix


def test_whole_buffers_and_none_without_only_still_pass() -> None:
    assert parse_perturbation({"tracing": {"policy": "per_rank", "buffer_bytes": 100.0}}).tracing is not None
    assert not parse_perturbation({"instrumentation": {"events": "none"}}).instrumentation.active


@pytest.mark.parametrize("model", ["periodic", "poisson"])
def test_zero_duration_noise_is_refused(model: str) -> None:
    table = {"model": model, "frequency" if model == "periodic" else "rate": 100.0, "duration": 0.0}
    with pytest.raises(InputError) as exc:
        parse_perturbation({"noise": table}, "s.toml")
    assert exc.value.field == "noise.duration" and "a detour of 0 s is no detour" in exc.value.problem
    assert 'model = "none"' in exc.value.fix and "duration >= 1e-09 s" in exc.value.fix


@pytest.mark.parametrize(("name", "body", "key"), [
    ("i_none_only", '[instrumentation]\nevents = "none"\nonly = ["recv"]\n', "instrumentation.only"),
    ("n_dur0", '[noise]\nmodel = "periodic"\nfrequency = 100.0\nduration = 0\n', "noise.duration"),
    ("pdur0", '[noise]\nmodel = "poisson"\nrate = 100.0\nduration = 0\n', "noise.duration"),
    ("t_buf_frac", '[tracing]\npolicy = "per_rank"\nbuffer_bytes = 100.5\n', "tracing.buffer_bytes"),
])
def test_refusals_are_one_line_naming_file_key_and_fix(tmp_path: Path, name: str, body: str, key: str) -> None:
    (tmp_path / f"{name}.toml").write_text(PINGPONG + "\n" + body)
    res = subprocess.run([sys.executable, "-m", "waitlab", "run", f"{name}.toml", "-o", "out"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and re.match(rf"waitlab: error: {name}\.toml: {re.escape(key)}: .+ \(fix: .+\)$",
                                        lines[0]), lines
    assert not (tmp_path / "out").exists()


@pytest.mark.simgrid
def test_swap_at_no_cost_still_violates_p1_and_says_why(tmp_path: Path) -> None:
    # [tracing] alone records every MPI call with copy_cost 0: 64-byte records, a send and a recv per step, 8 per
    # rank.  okita_myrinet places one rank per node, so each keeps 200 B: the 4th record reaches 256 B (56 B past
    # the share), the 5th to 8th are 64 B past it each: 56 + 4 x 64 = 312 B per rank, 624 B in all.  A swap stall
    # costs (74.8 - 1) x 0 s per byte: P1 (a property of memory) is violated, and the report says the swap was free
    out = _run(tmp_path, "swapfree", PINGPONG + '\n[tracing]\npolicy = "keep"\nmemory = 200\n')
    rep = json.loads((out / "perturbation.json").read_text())
    assert rep["spill"]["swap_bytes"] == 624.0 and rep["injected_seconds"]["swap"] == 0.0
    assert not rep["spill"]["p1_ok"]
    assert ("P1 (no swapping) violated (at no cost: a swap stall is (swap_factor - 1) x copy_cost per swapped "
            "byte, and instrumentation.copy_cost is 0)") in (out / "perturbation.txt").read_text()
