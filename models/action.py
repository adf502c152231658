"""One action of the MPI action vocabulary: the :class:`Action` record and the values its fields take.

:mod:`waitlab.models.vocabulary` declares every action as one :class:`Action` row and derives every other list of
actions from them; this module holds what a row is: its kinds (:data:`KINDS`), wait-state pattern families
(:data:`PATTERN_FAMILIES`), byte-accounting rules (:data:`BYTE_RULES`) and the TI argument shapes several
actions share (:data:`REDUCTION_ARGS`, ...).  Every name here is importable from
:mod:`waitlab.models.vocabulary` too.

Examples
--------
>>> a = Action("gatherv", 21, "collective", ("scount", "rcounts*N", "root?", "sdt?", "rdt?"), "root")
>>> a.is_rooted, a.arg_index("root"), a.arg_position("root", 4), a.arity(4)
(True, 2, 5, (5, 8))
"""

from __future__ import annotations

from dataclasses import dataclass

#: Action kinds.
KINDS = ("setup", "send", "recv", "sendrecv", "completion", "collective", "local", "marker", "rma", "post")
#: Wait-state pattern families (DESIGN.md section 5): late sender/receiver, Wait at NxN, Late Broadcast (1xN),
#: Early Reduce (Nx1), Early Scan, Wait at Barrier.
PATTERN_FAMILIES = ("late_sender", "late_receiver", "nxn", "1xn", "nx1", "scan", "barrier",
                    "rma_fence", "rma_gats", "rma_lock", "rma_op")
#: Byte-accounting rules (:mod:`waitlab.models.byte_accounting`).
BYTE_RULES = ("none", "p2p_send", "p2p_recv", "one_to_all", "all_to_one", "one_to_all_v", "all_to_one_v",
              "all_to_all", "all_to_all_v", "reduce_scatter", "scan", "exscan")


@dataclass(frozen=True)
class Action:
    """One action of the vocabulary.

    Attributes
    ----------
    name : str
        TI action name (as SimGrid spells it).
    code : int
        Integer code: row of :data:`VOCABULARY`, index of :data:`ACTIONS`, value of the C enum ``WL_<NAME>``.
    kind : str
        One of :data:`KINDS`.
    ti_args : tuple of str
        TI arguments after the action name, in SimGrid 3.32 order.  ``x?`` is optional, ``x*N`` one value per rank.
    peer_role : str or None
        What the operation table's ``peer`` column holds: ``"dst"``, ``"src"``, ``"root"``, ``"request"`` (the
        partner of the request a ``wait`` completes), or None.
    value, value2 : str
        Meaning of the ``value`` and ``value2`` columns ("" when unused).
    byte_rule : str
        One of :data:`BYTE_RULES`: bytes sent and received per rank.
    pattern : str or None
        Wait-state pattern family (:data:`PATTERN_FAMILIES`) of a collective, None otherwise.
    blocking : bool
        A point-to-point operation that completes itself (``send``/``recv``).
    vector : bool
        A v-collective whose TI line carries one count per rank.
    cpu_bound : bool
        Uses the CPU for its whole duration (noise lands on it).
    flops_in_value2 : bool
        A reduction whose ``value2`` is flops computed at its end.
    stock : bool
        SimGrid's stock replay registers it (False: waitlab's replay extension adds it).
    event_kind : str
        The event table's ``kind`` of the action (``mpi``, ``compute``, ``noise``, ..., ``other``).
    """

    name: str
    code: int
    kind: str
    ti_args: tuple[str, ...] = ()
    peer_role: str | None = None
    value: str = ""
    value2: str = ""
    byte_rule: str = "none"
    pattern: str | None = None
    blocking: bool = False
    vector: bool = False
    cpu_bound: bool = False
    flops_in_value2: bool = False
    stock: bool = True

    @property
    def is_mpi(self) -> bool:
        """An MPI operation (the event table's kind ``mpi``)."""
        return self.kind in ("send", "recv", "sendrecv", "completion", "collective", "rma", "post")

    @property
    def is_collective(self) -> bool:
        return self.kind == "collective"

    @property
    def is_rooted(self) -> bool:
        return self.kind == "collective" and self.peer_role == "root"

    @property
    def event_kind(self) -> str:
        if self.is_mpi:
            return "mpi"
        if self.kind == "local":
            return self.name
        return "other"

    def arg_index(self, arg: str) -> int:
        """Position of TI argument ``arg`` (without ``?``) after the action name, counting a ``*N`` vector as
        one slot; use :meth:`arg_position` for the position in a line of ``n`` ranks."""
        return [_bare(a) for a in self.ti_args].index(arg)

    def arg_position(self, arg: str, n: int) -> int:
        """Position of TI argument ``arg`` after the action name in a line of ``n`` ranks (vectors expanded)."""
        pos = 0
        for a in self.ti_args:
            if _bare(a) == arg:
                return pos
            pos += n if a.endswith("*N") else 1
        raise ValueError(f"{self.name} has no TI argument {arg!r}")

    def arity(self, n: int) -> tuple[int, int]:
        """Smallest and largest number of TI arguments of a line of ``n`` ranks."""
        width = [n if a.endswith("*N") else 1 for a in self.ti_args]
        required = [w for a, w in zip(self.ti_args, width, strict=True) if not a.endswith("?")]
        return sum(required), sum(width)


def _bare(arg: str) -> str:
    """A TI argument's name without its ``?`` and ``*N`` marks."""
    return arg.rstrip("?").removesuffix("*N")


#: TI argument shapes shared by several actions (the trace writer and reader handle each shape once).
REDUCTION_ARGS = ("count", "flops", "dt?")
EXCHANGE_ARGS = ("scount", "rcount", "sdt?", "rdt?")
ROOTED_EXCHANGE_ARGS = ("scount", "rcount", "root?", "sdt?", "rdt?")
REGION_ARGS = ("region",)
