"""The checkable statements of Rao et al. (sections 5.1-5.4 and the abstract), judged on a time table.

Each statement is a ranking, crossover or scaling claim the paper makes about its measurements on
DeepComp 7000 and Dawning 5000A (8 ranks per node).  :func:`judge` evaluates every statement on a
table of simulated times and marks it ``holds`` (true at every point it covers), ``partly`` (at least
half of them), ``fails`` (fewer), or ``not run`` (a point it needs is missing), with the numbers.

Sizes: "short" is 512 B and 2 KB, "long" 128 KB and more (the paper's figures 1-9).

There are 18 statements.  Section 5.2's "native is best for short messages" is not a row of its own: the
two Dawning crossover rows check it (ring and pair must be slower than native below their crossover).
Three remarks of section 5.4 are too vague to check and are left out: pair and ring "also do well" for
short messages on both machines (5.4(2)), pair "scales better with ranks" than ring (5.4(3)), and LAM
simple is "average but stable" on Dawning (5.4(4)).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["ALGORITHMS", "SIZES", "STATEMENTS", "Statement", "judge"]

#: The eight algorithms, in the paper's order (waitlab names; ``basic_linear`` is MPICH's native one).
ALGORITHMS: tuple[str, ...] = ("2dmesh", "3dmesh", "bruck", "basic_linear", "pair", "rdb", "ring", "lam_simple")
#: The paper's message sizes (section 4.2), bytes per rank pair.
SIZES: tuple[int, ...] = (512, 2048, 4096, 16384, 65536, 131072, 262144, 524288)
SHORT = (512, 2048)
LONG = (131072, 262144, 524288)
D, C = "dawning_5000a", "deepcomp_7000"
NATIVE, LAM = "basic_linear", "lam_simple"


class Missing(Exception):
    """A point a statement needs is not in the table."""


class Times:
    """Lookup ``t(platform, algorithm, ranks, size)`` in a time table; :class:`Missing` if absent."""

    def __init__(self, table: pd.DataFrame) -> None:
        ok = table[np.isfinite(table["seconds"].astype(float))]
        self.index = {(r.platform, r.algorithm, int(r.ranks), int(r.size)): float(r.seconds)
                      for r in ok.itertuples()}
        refused = table[table["status"] == "refused"] if "status" in table else table.iloc[:0]
        self.refused = {(r.platform, r.algorithm, int(r.ranks), int(r.size)) for r in refused.itertuples()}

    def among(self, platform: str, algorithms: Sequence[str], ranks: int, size: int) -> list[str]:
        """``algorithms`` without those SimGrid cannot simulate at this point (refused, not failed)."""
        return [a for a in algorithms if (platform, a, ranks, size) not in self.refused]

    def has(self, platform: str, algorithms: Sequence[str], ranks: int, sizes: Sequence[int]) -> bool:
        """Whether every point is in the table."""
        return all((platform, a, ranks, s) in self.index for a in algorithms for s in sizes)

    def __call__(self, platform: str, algorithm: str, ranks: int, size: int) -> float:
        try:
            return self.index[(platform, algorithm, ranks, size)]
        except KeyError:
            raise Missing(f"{platform} {algorithm} {ranks} ranks {size} B") from None


Check = Callable[[Times], tuple[list[bool], str]]


@dataclass(frozen=True)
class Statement:
    """One claim: ``key``, the paper's ``section``, the claim in words, and its check."""

    key: str
    section: str
    text: str
    check: Check


def _ms(x: float) -> str:
    return f"{x * 1e3:.3g}"


def _faster(t: Times, plat: str, a: str, b: str, ranks: int, sizes: Sequence[int]) -> tuple[list[bool], str]:
    ok = [t(plat, a, ranks, s) < t(plat, b, ranks, s) for s in sizes]
    nums = ", ".join(f"{s}: {_ms(t(plat, a, ranks, s))} vs {_ms(t(plat, b, ranks, s))}" for s in sizes)
    return ok, f"{a} vs {b} ms at {ranks} ranks ({nums})"


def _growth(t: Times, plat: str, a: str, ranks: tuple[int, int], size: int) -> float:
    return t(plat, a, ranks[1], size) / t(plat, a, ranks[0], size)


def _size_growth(t: Times, plat: str, a: str, ranks: int) -> float:
    return t(plat, a, ranks, SIZES[-1]) / t(plat, a, ranks, SIZES[0])


def _best(t: Times, plat: str, ranks: int, size: int, among: Sequence[str] = ALGORITHMS) -> list[str]:
    return sorted(t.among(plat, among, ranks, size), key=lambda a: t(plat, a, ranks, size))


def _top(t: Times, plat: str, ranks: int, size: int, want: set[str], among: Sequence[str] = ALGORITHMS) -> bool:
    """Whether every algorithm of ``want`` is strictly faster than every other one of ``among``."""
    others = [t(plat, a, ranks, size) for a in t.among(plat, among, ranks, size) if a not in want]
    return max(t(plat, a, ranks, size) for a in want) < min(others)


def _s_indirect_slowest(t: Times) -> tuple[list[bool], str]:
    ok, nums = [], []
    for plat in (C, D):
        for s in (65536, 131072, 262144):  # rdb overflows SimGrid at 512 KB and 64 ranks
            order = _best(t, plat, 64, s)
            ok.append(_top(t, plat, 64, s, set(ALGORITHMS) - {"rdb", "2dmesh", "3dmesh"}))
            nums.append(f"{plat[:8]} {s}: slowest {', '.join(order[-3:])}")
    return ok, "; ".join(nums)


def _s_native_flat(t: Times) -> tuple[list[bool], str]:
    a, b = t(C, NATIVE, 64, 65536), t(C, NATIVE, 64, 131072)
    return [b < a], f"native 64 KB {_ms(a)} ms, 128 KB {_ms(b)} ms"


def _s_deepcomp_long_best3(t: Times) -> tuple[list[bool], str]:
    ok, nums = [], []
    for s in LONG:
        top = _best(t, C, 64, s)[:3]
        ok.append(_top(t, C, 64, s, {LAM, "pair", "ring"}))
        nums.append(f"{s}: {', '.join(top)}")
    return ok, "fastest three at 64 ranks: " + "; ".join(nums)


def _s_deepcomp_pair_ring_beat_lam(t: Times) -> tuple[list[bool], str]:
    ok1, n1 = _faster(t, C, "pair", LAM, 64, SIZES[2:])
    ok2, n2 = _faster(t, C, "ring", LAM, 64, SIZES[2:])
    return [a and b for a, b in zip(ok1, ok2, strict=True)], n1 + "; " + n2


def _s_deepcomp_ring_pair_cross(t: Times) -> tuple[list[bool], str]:
    ok1, n1 = _faster(t, C, "ring", "pair", 64, (512, 2048, 4096))
    ok2, n2 = _faster(t, C, "pair", "ring", 64, SIZES[3:])
    return ok1 + ok2, n1 + "; " + n2


def _ranks_run(t: Times, algorithms: Sequence[str]) -> tuple[int, ...]:
    """64, and 128 when Dawning's 128-rank points of ``algorithms`` were run (figures 3-4 of the paper)."""
    return (64, 128) if t.has(D, algorithms, 128, SIZES[2:]) else (64,)


def _s_dawning_lam_next(t: Times) -> tuple[list[bool], str]:
    ok, nums = [], []
    for r in _ranks_run(t, (LAM, NATIVE, "pair", "ring")):
        for s in (65536, *LONG):
            others = [t(D, a, r, s) for a in (NATIVE, "pair", "ring")]
            ok.append(t(D, LAM, r, s) > max(others))
            nums.append(f"{r}/{s}: lam {_ms(t(D, LAM, r, s))} vs best of native/pair/ring {_ms(min(others))}")
    return ok, "; ".join(nums)


def _s_dawning_size_scaling(t: Times) -> tuple[list[bool], str]:
    ok, nums = [], []
    for r in _ranks_run(t, ("2dmesh", "bruck", NATIVE, "pair", "ring")):
        g = {a: _size_growth(t, D, a, r) for a in ("2dmesh", "bruck", NATIVE, "pair", "ring")}
        ok.append(min(g["2dmesh"], g["bruck"]) > max(g[NATIVE], g["pair"], g["ring"]))
        nums.append(f"{r} ranks: " + ", ".join(f"{a} x{v:.0f}" for a, v in g.items()))
    return ok, "t(512 KB)/t(512 B): " + "; ".join(nums)


def _cross(t: Times, plat: str, ranks: int, a: str, b: str, at: int) -> tuple[list[bool], str]:
    """``a`` slower than ``b`` below ``at`` bytes, faster from ``at`` on."""
    ok = [(t(plat, a, ranks, s) < t(plat, b, ranks, s)) == (s >= at) for s in SIZES]
    nums = ", ".join(f"{s}: {_ms(t(plat, a, ranks, s))}/{_ms(t(plat, b, ranks, s))}" for s in SIZES)
    return ok, f"{a}/{b} ms at {ranks} ranks: {nums}"


def _s_dawning_ring_4k(t: Times) -> tuple[list[bool], str]:
    return _cross(t, D, 64, "ring", NATIVE, 4096)


def _s_dawning_pair_16k(t: Times) -> tuple[list[bool], str]:
    return _cross(t, D, 64, "pair", NATIVE, 16384)


def _s_dawning_ring_beats_pair(t: Times) -> tuple[list[bool], str]:
    # One verdict on the pooled points ("generally"); the text gives each rank count, since Rao et al. 5.2 say the
    # Dawning conclusions still hold as the rank count grows: a rank count where pair wins most sizes contradicts
    # that, which the pooled share hides.
    pts = [(r, s) for r in (64, 128) for s in SIZES]
    wins = [t(D, "ring", r, s) < t(D, "pair", r, s) for r, s in pts]
    share = float(np.mean(wins))
    per = []
    for r in (64, 128):
        w = [t(D, "ring", r, s) < t(D, "pair", r, s) for s in SIZES]
        lost = [s for s, ok in zip(SIZES, w, strict=True) if not ok]
        per.append(f"{r} ranks {sum(w)}/{len(w)}" + (f" (pair faster at {_sizes(lost)})" if lost else ""))
    against = [r for r in (64, 128) if 2 * sum(t(D, "ring", r, s) < t(D, "pair", r, s) for s in SIZES) < len(SIZES)]
    note = (f"; pooled verdict: at {', '.join(map(str, against))} ranks pair beats ring at most sizes, against "
            "Rao et al. 5.2 (the Dawning conclusions still hold with more ranks)") if against else ""
    return [share > 0.5], (f"ring faster than pair at {sum(wins)} of {len(wins)} points (64, 128 ranks): "
                           + "; ".join(per) + note)


def _sizes(sizes: Sequence[int]) -> str:
    """Message sizes as the paper writes them (512 B, 16 KB, ...)."""
    return ", ".join(f"{s // 1024} KB" if s >= 1024 else f"{s} B" for s in sizes)


def _s_dawning_128_cross(t: Times) -> tuple[list[bool], str]:
    ok1, n1 = _cross(t, D, 128, "ring", NATIVE, 2048)
    ok2, n2 = _cross(t, D, 128, "pair", NATIVE, 4096)
    return ok1 + ok2, n1 + "; " + n2


def _rank_growth(t: Times, size: int, algs: Sequence[str]) -> dict[str, float]:
    return {a: _growth(t, D, a, (64, 256), size) for a in algs}


def _s_512_rank_scaling(t: Times) -> tuple[list[bool], str]:
    g = _rank_growth(t, 512, ("bruck", NATIVE, "ring", LAM, "pair"))
    return ([max(g["bruck"], g[NATIVE]) < min(g["ring"], g[LAM])],
            "t(256)/t(64) at 512 B: " + ", ".join(f"{a} x{v:.2f}" for a, v in g.items()))


def _s_4k_rank_scaling(t: Times) -> tuple[list[bool], str]:
    g = _rank_growth(t, 4096, ("ring", "pair", NATIVE, LAM, "bruck"))
    return ([max(g["ring"], g["pair"]) < min(g[NATIVE], g[LAM], g["bruck"])],
            "t(256)/t(64) at 4 KB: " + ", ".join(f"{a} x{v:.2f}" for a, v in g.items()))


def _s_4k_bruck_beats_native(t: Times) -> tuple[list[bool], str]:
    return _faster(t, D, "bruck", NATIVE, 256, (4096, 16384))


def _s_256k_bruck_grows(t: Times) -> tuple[list[bool], str]:
    g = _rank_growth(t, 262144, ("bruck", "pair", "ring", NATIVE))
    return ([g["bruck"] > max(v for a, v in g.items() if a != "bruck")],
            "t(256)/t(64) at 256 KB: " + ", ".join(f"{a} x{v:.2f}" for a, v in g.items()))


def _s_256k_pair_256_below_128(t: Times) -> tuple[list[bool], str]:
    a, b = t(D, "pair", 128, 262144), t(D, "pair", 256, 262144)
    return [b < a], f"pair at 256 KB: 128 ranks {_ms(a)} ms, 256 ranks {_ms(b)} ms"


def _s_short_best_two(t: Times) -> tuple[list[bool], str]:
    ok, nums = [], []
    for plat, want in ((D, {NATIVE, "bruck"}), (C, {LAM, "bruck"})):
        for s in SHORT:
            top = _best(t, plat, 64, s)[:2]
            ok.append(_top(t, plat, 64, s, want))
            nums.append(f"{plat[:8]} {s}: {', '.join(top)}")
    return ok, "fastest two at 64 ranks: " + "; ".join(nums)


def _s_long_best(t: Times) -> tuple[list[bool], str]:
    ok, nums = [], []
    for plat, want in ((D, "ring"), (C, "pair")):
        for s in LONG:
            best = _best(t, plat, 64, s)[0]
            ok.append(_top(t, plat, 64, s, {want}))
            nums.append(f"{plat[:8]} {s}: {best}")
    return ok, "fastest at 64 ranks: " + "; ".join(nums)


STATEMENTS: tuple[Statement, ...] = (
    Statement("indirect-slowest", "5.1, 5.2, 5.4(1)", "rdb, 2D and 3D mesh are the slowest three for long messages "
              "(64-256 KB, 64 ranks) on both machines", _s_indirect_slowest),
    Statement("deepcomp-native-flat", "5.1", "DeepComp: native's time drops at 128 KB (64 ranks)", _s_native_flat),
    Statement("deepcomp-long-best3", "5.1", "DeepComp: LAM simple, pair and ring are the fastest three for long "
              "messages (64 ranks)", _s_deepcomp_long_best3),
    Statement("deepcomp-pair-ring-beat-lam", "5.1", "DeepComp: pair and ring beat LAM simple (node contention), "
              "4 KB+ at 64 ranks", _s_deepcomp_pair_ring_beat_lam),
    Statement("deepcomp-ring-pair-cross", "5.1", "DeepComp: ring beats pair up to 4 KB, pair beats ring above "
              "(64 ranks)", _s_deepcomp_ring_pair_cross),
    Statement("dawning-lam-next", "5.2, 5.4(4)", "Dawning: LAM simple is slower than pair, ring and native for "
              "long messages (64 and, where run, 128 ranks)", _s_dawning_lam_next),
    Statement("dawning-size-scaling", "5.2", "Dawning: 2D mesh and Bruck scale worst with message size among "
              "2D mesh, Bruck, native, pair, ring (64 and, where run, 128 ranks)", _s_dawning_size_scaling),
    Statement("dawning-ring-4k", "5.2", "Dawning 64 ranks: ring beats native from 4 KB on, not below",
              _s_dawning_ring_4k),
    Statement("dawning-pair-16k", "5.2", "Dawning 64 ranks: pair beats native from 16 KB on, not below",
              _s_dawning_pair_16k),
    Statement("dawning-ring-beats-pair", "5.2", "Dawning: ring is generally faster than pair",
              _s_dawning_ring_beats_pair),
    Statement("dawning-128-cross", "5.2", "Dawning 128 ranks: the crossovers move down (ring 2 KB, pair 4 KB)",
              _s_dawning_128_cross),
    Statement("512-rank-scaling", "5.3", "Dawning 512 B: Bruck and native scale best with ranks, ring and LAM "
              "simple worst", _s_512_rank_scaling),
    Statement("4k-rank-scaling", "5.3, 5.4(3)", "Dawning 4 KB: ring and pair scale best with ranks; native, LAM "
              "simple and Bruck worse", _s_4k_rank_scaling),
    Statement("4k-bruck-beats-native", "5.3", "Dawning, many ranks (256), medium messages: Bruck beats native",
              _s_4k_bruck_beats_native),
    Statement("256k-bruck-grows", "5.3", "Dawning 256 KB: Bruck's time grows fastest with ranks", _s_256k_bruck_grows),
    Statement("256k-pair-256-below-128", "5.3", "Dawning 256 KB: pair takes less time at 256 ranks than at 128",
              _s_256k_pair_256_below_128),
    Statement("short-best-two", "abstract, 5.4(2)", "short messages: Dawning's fastest two are native and Bruck, "
              "DeepComp's LAM simple and Bruck", _s_short_best_two),
    Statement("long-best", "abstract, 5.4(3)", "long messages: ring is fastest on Dawning, pair on DeepComp",
              _s_long_best),
)


def judge(table: pd.DataFrame, statements: Sequence[Statement] = STATEMENTS) -> pd.DataFrame:
    """Verdict per statement on a time table (columns platform, algorithm, ranks, size, seconds).

    Returns
    -------
    pandas.DataFrame
        ``key``, ``section``, ``statement``, ``verdict`` (holds | partly | fails | not run), ``points``
        (how many of the covered points agree, e.g. ``"3/4"``) and ``numbers``.
    """
    t = Times(table)
    rows = []
    for st in statements:
        try:
            ok, numbers = st.check(t)
        except Missing as exc:
            rows.append({"key": st.key, "section": st.section, "statement": st.text, "verdict": "not run",
                         "points": "", "numbers": f"missing {exc}"})
            continue
        n = sum(ok)
        verdict = "holds" if n == len(ok) else "partly" if 2 * n >= len(ok) and n > 0 else "fails"
        rows.append({"key": st.key, "section": st.section, "statement": st.text, "verdict": verdict,
                     "points": f"{n}/{len(ok)}", "numbers": numbers})
    return pd.DataFrame(rows)
