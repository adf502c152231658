"""The MPI library's one-sided protocol (issue 12, docs/rma.md "MPI library protocol"), computed by hand.

``[mpi] rma_protocol = "mvapich2"`` makes the measurement layer send the messages of MVAPICH2's protocol through
SimGrid.  The ``simgrid`` tests run ``tests/programs/rma_delivery.c`` (rank 0 puts ``S`` bytes to rank 1) on two
nodes of a copy of the Dawning 5000A platform, whose MPI latency is ``M = 1.6 us`` for an 8-byte message (Rao et
al., ``platforms/data/dawning_5000a.toml``; the protocol's control messages are 8 bytes) and whose rendezvous
starts at 12,288 bytes.  ``D(S)``, the one-way time of the ``S``-byte put, is measured independently under SMPI's
own protocol, where lock-put-unlock is exactly that one message (docs/rma.md).  By hand:

* passive target, ``S`` below the rendezvous: lock = request + grant = 2M, put = D(S), unlock = done ack = M;
* from the rendezvous size on: put = RTS + CTS + data = 2M + D(S);
* active target, ``S`` up to 8 KB (a packet): put = D(S) + completion ack M; complete = o_s + done flag M + its
  ack M (o_s = 0.25 us, the platform's send overhead, which SMPI charges for the done notification), the target's
  wait returns when the done notification arrives, one message after the origin's complete began;
* active target, ``S`` above 8 KB (a direct RDMA write, MVAPICH2's ``rdma_put_fallback_threshold``): the put returns
  after SMPI's o_s; a second put to the same target waits for the first one's delivery (one queue pair, in order):
  it takes D(S); complete = the last write's delivery (D(S) - o_s after complete began) + its ack M, then o_s + done
  flag M + ack M, so complete = D(S) + 3M and the epoch of ``n`` puts is n D(S) + 3M + o_s.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from waitlab.errors import InputError
from waitlab.experiments.pipeline import simulate
from waitlab.experiments.scenario import from_mapping
from waitlab.platforms import load_platform
from waitlab.platforms.mpi_spec import rma_env
from waitlab.platforms.render import render_platform

HAVE_SMPI = shutil.which("smpirun") is not None and shutil.which("smpicc") is not None
PROGRAM = Path(__file__).parent / "programs" / "rma_delivery.c"
M = 1.6e-6  # one-way time of an 8-byte message, dawning_5000a.toml [mpi] inter_node[0]
O_S = 2.5e-7  # send overhead, dawning_5000a.toml [mpi] send_overhead
EAGER = 12288  # dawning_5000a.toml [mpi] eager_threshold
RDMA = 8192  # MVAPICH2 1.x rdma_put_fallback_threshold: active-target puts above it are direct RDMA writes
TOL = 2e-9


def platform_file(tmp: Path, protocol: str | None) -> Path:
    """A copy of the Dawning 5000A platform with ``[mpi] rma_protocol`` set (or left out), without its
    ``[contention]`` laws and send-order cost (the hand calculations count messages, not contention)."""
    text = Path(load_platform("dawning_5000a").file).read_text().split("\n[contention]\n", 1)[0]
    if protocol is not None:
        text = text.replace("[mpi]\n", f'[mpi]\nrma_protocol = "{protocol}"\n', 1)
    path = tmp / f"dawning_{protocol}.toml"
    path.write_text(text)
    return path


def test_protocol_is_read_from_the_platform_and_passed_to_programs(tmp_path: Path) -> None:
    assert load_platform("sunway_taihulight").mpi.rma_protocol == "mvapich2"  # type: ignore[union-attr]
    smpi = load_platform("dawning_5000a")
    assert smpi.mpi is not None and smpi.mpi.rma_protocol == "smpi" and rma_env(smpi.mpi) == {}
    mv2 = load_platform(str(platform_file(tmp_path, "mvapich2")))
    assert rma_env(mv2.mpi) == {"WAITLAB_RMA_PROTOCOL": "mvapich2", "WAITLAB_RMA_EAGER": "12288"}
    assert render_platform(mv2, 2, ranks_per_node=1).program_env == rma_env(mv2.mpi)


def test_unknown_protocol_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"mpi\.rma_protocol: must be one of smpi, mvapich2, got 'openmpi'"):
        load_platform(str(platform_file(tmp_path, "openmpi")))


def _events(tmp: Path, protocol: str | None, mode: str, size: int, puts: int = 1) -> pd.DataFrame:

    sc = from_mapping({"scenario": {"name": "rma_protocol", "ranks": 2},
                       "platform": {"name": str(platform_file(tmp, protocol)), "ranks_per_node": 1},
                       "application": {"kind": "program", "sources": [str(PROGRAM)],
                                       "args": [mode, str(size), "1", str(puts)]},
                       "simulation": {"timeout": 60}}, str(tmp / "s.toml"))
    ev = simulate(sc).events
    nth = ev.groupby(["rank", "op"]).cumcount().astype(str)  # the k-th call of an op on a rank: "0:put", "0:put#1"
    return ev.set_index(ev["rank"].astype(str) + ":" + ev["op"].astype(str) + ("#" + nth).where(nth != "0", ""))


def _dur(ev: pd.DataFrame, key: str) -> float:
    return float(ev.loc[key, "exit"] - ev.loc[key, "enter"])


def _smpi_one_way(tmp: Path, size: int) -> float:
    """D(size): SMPI's lock-put-unlock is the put's one message (from the put's start to the unlock's return)."""
    ev = _events(tmp, None, "lock", size)
    assert _dur(ev, "0:win_lock") == 0.0  # SMPI's passive lock sends nothing (docs/rma.md)
    return float(ev.loc["0:win_unlock", "exit"] - ev.loc["0:put", "enter"])


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI (smpirun, smpicc) is not installed")
@pytest.mark.parametrize("size", [8, EAGER - 1, EAGER])
def test_passive_target_lock_put_unlock_by_hand(tmp_path: Path, size: int) -> None:
    d = _smpi_one_way(tmp_path, size)
    ev = _events(tmp_path, "mvapich2", "lock", size)
    rendezvous = 2 * M if size >= EAGER else 0.0
    assert _dur(ev, "0:win_lock") == pytest.approx(2 * M, abs=TOL)  # lock request + grant
    assert _dur(ev, "0:put") == pytest.approx(rendezvous + d, abs=TOL)  # [RTS + CTS] + data, delivered
    assert _dur(ev, "0:win_unlock") == pytest.approx(M, abs=TOL)  # done acknowledgement
    if size == 8:
        assert d == pytest.approx(M, abs=TOL)  # the platform's own figure: 4 messages = 6.4 us in all


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI (smpirun, smpicc) is not installed")
def test_active_target_put_waits_for_its_completion_and_complete_for_the_done_flag(tmp_path: Path) -> None:
    smpi = _events(tmp_path, None, "pscw", 8)
    assert _dur(smpi, "0:put") == pytest.approx(O_S, abs=TOL)  # SMPI: the put returns at once
    assert _dur(smpi, "0:win_complete") == pytest.approx(O_S, abs=TOL)
    ev = _events(tmp_path, "mvapich2", "pscw", 8)
    assert _dur(ev, "0:put") == pytest.approx(2 * M, abs=TOL)  # data + RDMA completion acknowledgement
    assert _dur(ev, "0:win_complete") == pytest.approx(O_S + 2 * M, abs=TOL)  # done flag + its acknowledgement
    done_arrives = float(ev.loc["1:win_wait", "exit"] - ev.loc["0:win_complete", "enter"])
    assert done_arrives == pytest.approx(M, abs=1e-8)  # SMPI's zero-byte done notification (1.595 us)
    # from the post's arrival (start returns) to the target's wait returning: data, ack, done = 3 messages
    assert float(ev.loc["1:win_wait", "exit"] - ev.loc["0:win_start", "exit"]) == pytest.approx(3 * M, abs=1e-8)


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI, reason="SimGrid SMPI (smpirun, smpicc) is not installed")
@pytest.mark.parametrize("size", [RDMA + 1, EAGER])
def test_active_target_large_puts_are_pipelined_rdma_writes(tmp_path: Path, size: int) -> None:
    d = _smpi_one_way(tmp_path, size)
    ev = _events(tmp_path, "mvapich2", "pscw", size, puts=2)
    assert _dur(ev, "0:put") == pytest.approx(O_S, abs=TOL)  # issued, not waited for
    assert _dur(ev, "0:put#1") == pytest.approx(d, abs=TOL)  # waits for the first write's delivery (same QP)
    assert _dur(ev, "0:win_complete") == pytest.approx(d + 3 * M, abs=TOL)  # delivery, ack, done flag + ack
    epoch = float(ev.loc["0:win_complete", "exit"] - ev.loc["0:put", "enter"])
    assert epoch == pytest.approx(2 * d + 3 * M + O_S, abs=TOL)
    one = _events(tmp_path, "mvapich2", "pscw", RDMA)  # 8 KB exactly: still a packet (MVAPICH2: size > 8 KB)
    assert _dur(one, "0:put") == pytest.approx(_smpi_one_way(tmp_path, RDMA) + M, abs=TOL)


@pytest.mark.simgrid
@pytest.mark.skipif(not HAVE_SMPI or shutil.which("smpif90") is None or shutil.which("gfortran") is None,
                    reason="SimGrid SMPI with Fortran (smpif90, gfortran) is not installed")
def test_fortran_programs_get_the_protocol_too(tmp_path: Path) -> None:
    # tests/programs/rma_fence_lock.f90: rank 0 locks rank 2 (nobody else holds it yet): request + grant = 2M;
    # rank 1 asks 0.05 s later and waits for rank 0's unlock: Lock Contention 0.15 s plus protocol microseconds.

    sc = from_mapping({"scenario": {"name": "rma_fence_lock", "ranks": 3},
                       "platform": {"name": str(platform_file(tmp_path, "mvapich2")), "ranks_per_node": 1},
                       "application": {"kind": "program",
                                       "sources": [str(PROGRAM.parent / "rma_fence_lock.f90")]},
                       "simulation": {"timeout": 60}}, str(tmp_path / "s.toml"))
    run = simulate(sc)
    ev = run.events
    lock0 = ev[(ev["rank"] == 0) & (ev["op"] == "win_lock")].iloc[0]
    assert float(lock0["exit"] - lock0["enter"]) == pytest.approx(2 * M, abs=TOL)
    w = run.waits
    cont = w[(w["rank"] == 1) & (w["pattern"] == "rma_lock_contention")]["wait"].sum()
    assert 0.15 < cont < 0.15 + 10 * M
