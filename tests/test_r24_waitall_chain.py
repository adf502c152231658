"""CWP-DM follows a wait through a ``waitall`` halo exchange (tester t2 of session 24; docs/diagnosis.md, "When the
models are wrong", case 5, now right).

A 1-D stencil of 4 ranks without collectives; rank 0 computes 0.05 s more in step 0.  Rank 1 waits for it in step
1, and rank 2 waits for rank 1 in step 2: 0.1 s of wait, all of it rank 0's (removing its excess removes both).
By hand: a synchronization point is a wait (Wu et al., after Böhme et al.; Scalasca's SynchpointHandler.cpp), so
rank 1's step-1 ``waitall``, which completed rank 2's message without waiting for it, is none between ranks 1 and
2; rank 2's interval on rank 1 reaches back to rank 1's first row and holds rank 1's own wait for rank 0, which
CWP-DM propagates to rank 0: both waits are explained.  (When every completed message was a synchronization point,
that ``waitall`` cut the interval and rank 2's wait stayed unexplained.)  H-CWP-DM does not propagate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import waitlab
from waitlab.cli import main

SCENARIO = """\
[scenario]
name = "waitall-chain"
ranks = 4
seed = 1
[platform]
name = "dawning_5000a"
[application]
kind = "stencil"
dims = 1
steps = 3
compute_seconds = 0.1
halo_bytes = 1024
allreduce_every = 0
[[application.imbalance]]
region = "Stencil"
ranks = [0]
distribution = "constant"
magnitude = 0.05
steps = [0]
"""


@pytest.mark.simgrid
def test_cwpdm_follows_a_wait_through_a_waitall(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text(SCENARIO)
    assert main(["run", str(toml), "-o", str(tmp_path / "run"), "-q"]) == 0
    d = waitlab.diagnose(tmp_path / "run", truth=False)
    by = d.waits.groupby(["rank", "step"])["wait"].sum()
    assert sorted(by.index.tolist()) == [(1, 1), (2, 2)]
    assert by.to_numpy() == pytest.approx([0.05, 0.05], abs=1e-5)  # the excess, less the messages' latency
    cwp = next(m for m in d.models if m.key == "cwpdm")
    assert cwp.attributed == pytest.approx(by.sum(), abs=1e-9) and cwp.unexplained == pytest.approx(0, abs=1e-9)
    blame = cwp.blame().groupby(["rank", "region"])["cost"].sum()
    assert blame[(0, "Stencil")] == pytest.approx(by.sum(), abs=1e-5)  # all of it rank 0's
