"""SimGrid's failures in its words and ours: deadlocks name ranks and calls, a refused setting is SimGrid's line."""

from __future__ import annotations

from pathlib import Path

import pytest
from bad_inputs_corpus import GOOD, write
from conftest import SPEED, star_platform

from waitlab.cli import main
from waitlab.errors import SimulationError
from waitlab.models.ops import OpBuilder
from waitlab.simulator.replay import replay_ops
from waitlab.simulator.smpi import DeadlockError, failure, parse_deadlock, simgrid_words

#: What SimGrid 3.32 printed on this machine for a 3-rank replay where ranks 0 and 1 receive first.
DEADLOCK_OUTPUT = """\
[0.001000] ./src/kernel/EngineImpl.cpp:718: [ker_engine/CRITICAL] Oops! Deadlock detected, some activities are \
still around but will never complete. This usually happens when the user code is not perfectly clean.
[0.001000] [ker_engine/INFO] 3 actors are still running, waiting for something.
[0.001000] [ker_engine/INFO] Legend of the following listing: "Actor <pid> (<name>@<host>): <status>"
[0.001000] [ker_engine/INFO] Actor 1 (0@n0): waiting for communication activity 0x55ac178220d0 () in state WAITING \
to finish
[0.001000] [ker_engine/INFO] Actor 2 (1@n1): waiting for communication activity 0x55ac17843d90 () in state WAITING \
to finish
[0.001000] [ker_engine/INFO] Actor 3 (2@n2): waiting for communication activity 0x55ac179dc690 () in state WAITING \
to finish
"""


def test_the_deadlock_listing_is_parsed():
    parsed = parse_deadlock(DEADLOCK_OUTPUT)
    assert parsed is not None
    t, actors = parsed
    assert t == 0.001
    assert [(a.pid, a.rank, a.host) for a in actors] == [(1, 0, "n0"), (2, 1, "n1"), (3, 2, "n2")]
    assert actors[0].status == "waiting for communication activity in state WAITING to finish"
    err = failure("replay", 0, DEADLOCK_OUTPUT)
    assert isinstance(err, DeadlockError)
    assert str(err).startswith("replay deadlocked at simulated time 0.001 s (SimGrid: Deadlock detected): 3 ranks "
                               "are blocked: rank 0 on n0: waiting for communication activity in state WAITING")
    assert parse_deadlock("all went well") is None


def test_key_lines_come_first():
    out = "noise\n[0.000000] ./src/xbt/exception.cpp:48: [xbt_exception/CRITICAL] Uncaught exception " \
          "std::out_of_range: Bad config key: smpi/nonsense\n  tracing/vm: (boolean)0\n  ->  0# 0x7F in lib\n"
    assert simgrid_words(out) == "Bad config key: smpi/nonsense"
    err = failure("run", 134, out)
    assert err.exit_code == 2 and "refused a setting of simulation.config" in str(err) and "->" not in str(err)
    crash = failure("run", -6, "malloc_consolidate(): invalid chunk size\n")
    assert "killed by signal SIGABRT" in str(crash) and "SimGrid said: malloc_consolidate()" in str(crash)


@pytest.mark.simgrid
def test_a_deadlocked_replay_names_the_blocked_ranks_and_their_calls(tmp_path: Path):
    xml, hostfile = star_platform(tmp_path, 3)
    b = OpBuilder(3)
    b.add("compute", ranks=[0, 1, 2], value=0.001)
    b.add("recv", ranks=0, peer=1, value=8)
    b.add("send", ranks=0, peer=1, value=8)
    b.add("recv", ranks=1, peer=0, value=8, tag=4)
    b.add("send", ranks=1, peer=0, value=8)
    b.add("barrier", ranks=2)
    with pytest.raises(DeadlockError) as info:
        replay_ops(b.build(), xml, hostfile, SPEED, timeout=120, work=tmp_path / "w")
    text = str(info.value)
    assert "deadlocked at simulated time 0.001 s (SimGrid: Deadlock detected): 3 ranks are blocked" in text
    assert "rank 0 in recv (operation 1, partner rank 1, tag 0)" in text
    assert "rank 1 in recv (operation 1, partner rank 0, tag 4)" in text
    assert "rank 2 in barrier (operation 1)" in text
    # the calls are named: one line with the fix, bad input (the trace or its operations), no SimGrid log
    assert "(fix: the blocked calls wait for each other" in text and "\n" not in text
    assert isinstance(info.value, SimulationError) and info.value.exit_code == 2


@pytest.mark.simgrid
def test_a_send_send_deadlock_says_to_post_the_receives_first(tmp_path: Path):
    xml, hostfile = star_platform(tmp_path, 2)
    b = OpBuilder(2)
    b.add("send", ranks=0, peer=1, value=1e6)  # both ranks send 1 MB (rendezvous) before receiving
    b.add("send", ranks=1, peer=0, value=1e6)
    b.add("recv", ranks=0, peer=1, value=1e6)
    b.add("recv", ranks=1, peer=0, value=1e6)
    with pytest.raises(DeadlockError) as info:
        replay_ops(b.build(), xml, hostfile, SPEED, timeout=120, work=tmp_path / "w")
    text = str(info.value)
    assert "rank 0 in send (operation 0, partner rank 1, tag 0); rank 1 in send (operation 0, partner rank 0" in text
    assert "(fix: a blocking send above the platform's eager threshold" in text and "post the receives first" in text
    assert info.value.exit_code == 2


@pytest.mark.simgrid
def test_a_bad_config_key_shows_simgrids_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    s = write(tmp_path / "s.toml", GOOD + '\n[simulation]\nconfig = { "smpi/nonsense" = "1" }\n')
    assert main(["run", str(s), "-o", str(tmp_path / "out"), "--no-png"]) == 2
    err = capsys.readouterr().err
    assert 'SimGrid refused a setting of simulation.config: "Bad config key: smpi/nonsense"' in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
