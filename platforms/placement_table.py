"""The placement a run records (``placement.csv``): rank, node, supernode, host.

Apart from :mod:`waitlab.platforms.placement` because it is a pandas table: the modules a run needs before its SMPI
stage import no pandas (docs/performance.md, the light path).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd


def placement_table(node_of_rank: npt.NDArray[np.int64] | tuple[int, ...], host_of_rank: tuple[str, ...],
                    leaf_size: int) -> pd.DataFrame:
    """The mapping a run records: ``rank, node, supernode, host``.

    >>> placement_table((0, 0, 300), ("node-0", "node-0", "node-300"), 256)["supernode"].tolist()
    [0, 0, 1]
    """
    node = np.asarray(node_of_rank, dtype=np.int64)
    return pd.DataFrame({"rank": np.arange(len(node), dtype=np.int64), "node": node,
                         "supernode": node // leaf_size, "host": list(host_of_rank)})
