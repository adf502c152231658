"""The placement a run records (``placement.csv``): rank, node, supernode, host.

Apart from :mod:`waitlab.platforms.placement` because it is a table: the modules a run needs before its SMPI stage
import no table library but numpy (docs/performance.md, the light path).  The run path makes it an Arrow table
(``arrow=True``), without pandas; a pandas DataFrame otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from waitlab.models import columns

if TYPE_CHECKING:
    import pandas as pd


def placement_table(node_of_rank: npt.NDArray[np.int64] | tuple[int, ...], host_of_rank: tuple[str, ...],
                    leaf_size: int, arrow: bool = False) -> pd.DataFrame | pa.Table:
    """The mapping a run records: ``rank, node, supernode`` (int64) and ``host`` (text); an Arrow table made
    without pandas when ``arrow``, else a pandas DataFrame.

    >>> placement_table((0, 0, 300), ("node-0", "node-0", "node-300"), 256)["supernode"].tolist()
    [0, 0, 1]
    >>> placement_table((0, 0, 300), ("node-0", "node-0", "node-300"), 256, arrow=True).column("host").to_pylist()
    ['node-0', 'node-0', 'node-300']
    """
    node = np.asarray(node_of_rank, dtype=np.int64)
    rank, supernode = np.arange(len(node), dtype=np.int64), node // leaf_size
    if arrow:
        return columns.table({"rank": rank, "node": node, "supernode": supernode,
                              "host": np.array(host_of_rank, dtype=str)})
    import pandas as pd  # a pandas table asked for

    return pd.DataFrame({"rank": rank, "node": node, "supernode": supernode, "host": list(host_of_rank)})
