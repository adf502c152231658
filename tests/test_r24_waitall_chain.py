"""CWP-DM does not follow a wait through a ``waitall`` halo exchange (tester t2 of session 24; docs/diagnosis.md,
"When the models are wrong", case 5).

A 1-D stencil of 4 ranks without collectives; rank 0 computes 0.05 s more in step 0.  Rank 1 waits for it in step
1, and rank 2 waits for rank 1 in step 2: 0.1 s of wait, all of it rank 0's (removing its excess removes both).  By
hand, with the definition of the synchronization interval (Wu et al., formula (2)): rank 2's interval on rank 1
starts at rank 1's step-1 ``waitall``, which completes rank 1's messages with both 0 and 2 and is the interval's
delimiter; rank 1's own wait lies in that delimiter, not inside the interval, so no delay is found there and rank
2's wait stays unexplained.  The models explain rank 1's wait and leave rank 2's.
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
def test_cwpdm_leaves_a_wait_through_a_waitall_unexplained(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text(SCENARIO)
    assert main(["run", str(toml), "-o", str(tmp_path / "run"), "-q"]) == 0
    d = waitlab.diagnose(tmp_path / "run", truth=False)
    by = d.waits.groupby(["rank", "step"])["wait"].sum()
    assert sorted(by.index.tolist()) == [(1, 1), (2, 2)]
    assert by.to_numpy() == pytest.approx([0.05, 0.05], abs=1e-5)  # the excess, less the messages' latency
    for m in d.models:
        if m.key in ("cwpdm", "hcwpdm", "hcwpdm_each"):
            assert m.attributed == pytest.approx(by[(1, 1)], abs=1e-12), m.key
            assert m.unexplained == pytest.approx(by[(2, 2)], abs=1e-12), m.key
