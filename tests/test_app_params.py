"""Application parameters: imbalance specifications and the scenario file's ``[application]`` table (pure)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from app_checks import SMALL, check_ledger, check_p2p_balance
from hypothesis import given, settings
from hypothesis import strategies as st

from waitlab.errors import InputError
from waitlab.models.apps.common import process_grid
from waitlab.models.apps.imbalance import DISTRIBUTIONS, Imbalance, RankSelection, excess_matrix
from waitlab.models.apps.registry import (
    APPLICATIONS,
    LaredSParams,
    WavefrontParams,
    generate,
    params_from_mapping,
    regions,
)
from waitlab.models.validation import ParamError

# ----------------------------------------------------------------------------------------------------------------
# imbalance specs


def test_excess_matrix_distributions() -> None:
    rng = np.random.default_rng(0)
    n, steps = 2000, 3
    for dist in DISTRIBUTIONS:
        m = excess_matrix([Imbalance("r", distribution=dist, magnitude=2.0, redraw=True)], n, steps, rng)
        assert m.shape == (steps, n) and (m >= 0).all()
        assert m.mean() == pytest.approx(2.0, rel=0.08), dist
    lin = excess_matrix([Imbalance("r", distribution="linear", magnitude=1.0)], 5, 2, rng)
    assert lin[0].tolist() == [0.0, 0.5, 1.0, 1.5, 2.0] and (lin[0] == lin[1]).all()
    persistent = excess_matrix([Imbalance("r", distribution="uniform", magnitude=1.0)], 50, 4, rng)
    assert (persistent == persistent[0]).all()


def test_rank_selections() -> None:
    rng = np.random.default_rng(1)
    assert RankSelection.parse({"every": 4}).resolve(10, rng).tolist() == [0, 4, 8]
    assert RankSelection.parse({"fraction": 0.25}).resolve(8, rng).size == 2
    picked = RankSelection.parse({"random": 3}).resolve(10, rng)
    assert picked.size == 3 and len(set(picked.tolist())) == 3
    assert RankSelection.parse([3, 1]).ranks == (1, 3)
    assert RankSelection.parse([3, 1]).as_spec() == [1, 3]
    with pytest.raises(ValueError, match="does not exist"):
        RankSelection.parse([12]).resolve(4, rng)
    with pytest.raises(ValueError, match="cannot choose"):
        RankSelection.parse({"random": 5}).resolve(4, rng)
    for bad in ("some", {"random": 0}, {"fraction": 1.5}, {"every": 2, "random": 1}, [-1], {"nth": 2}, [1, 1]):
        with pytest.raises(ParamError):
            RankSelection.parse(bad)
    with pytest.raises(ValueError, match="step 5"):
        excess_matrix([Imbalance("r", magnitude=1.0, steps=[5])], 4, 3, rng)


def test_imbalance_is_hashable_and_normalised() -> None:
    a = Imbalance("r", ranks=[2, 1], steps=[3, 1, 3], magnitude=1)
    assert a.steps == (1, 3) and a.magnitude == 1.0 and isinstance(a.ranks, RankSelection)
    assert hash(a) == hash(Imbalance("r", ranks=(1, 2), steps=(1, 3), magnitude=1.0))


specs = st.sampled_from(DISTRIBUTIONS).flatmap(lambda d: st.builds(
    Imbalance,
    region=st.just("r"),
    ranks=st.one_of(st.just("all"), st.lists(st.integers(0, 9), unique=True, min_size=1, max_size=10),
                    st.builds(lambda k: {"random": k}, st.integers(1, 10)),
                    st.builds(lambda f: {"fraction": f}, st.floats(0.01, 1.0)),
                    st.builds(lambda k: {"every": k}, st.integers(1, 12))),
    distribution=st.just(d),
    magnitude=st.floats(0.0, 100.0),
    steps=st.one_of(st.just("all"), st.lists(st.integers(0, 4), min_size=1, max_size=5)),  # [] is refused
    redraw=st.booleans(),
    spread=st.floats(0.0, 3.0) if d == "normal" else st.just(0.25),  # only "normal" reads spread
))


@settings(max_examples=150, deadline=None)
@given(st.lists(specs, max_size=4), st.integers(0, 2**32 - 1))
def test_excess_matrix_invariants(imbs: list[Imbalance], seed: int) -> None:
    m = excess_matrix(imbs, 10, 5, np.random.default_rng(seed))
    again = excess_matrix(imbs, 10, 5, np.random.default_rng(seed))
    assert m.shape == (5, 10) and np.isfinite(m).all() and (m >= 0).all()
    assert np.array_equal(m, again)
    for s in range(5):  # steps no spec selects stay zero
        if all(not isinstance(i.steps, str) and s not in i.steps for i in imbs):
            assert (m[s] == 0).all()


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(SMALL)), st.lists(specs, min_size=1, max_size=3), st.integers(0, 1000))
def test_any_imbalance_keeps_ledger_consistent(kind: str, imbs: list[Imbalance], seed: int) -> None:
    params, n = SMALL[kind]
    names = regions(params)
    steps = params.n_steps()
    fixed = []
    for i, spec in enumerate(imbs):
        st_ = spec.steps if isinstance(spec.steps, str) else tuple(s % steps for s in spec.steps)
        sel = spec.selection
        if sel.mode == "list":
            sel = RankSelection.parse([r for r in sel.ranks if r < n] or [0])
        elif sel.mode == "random":
            sel = RankSelection("random", count=min(sel.count, n))
        fixed.append(replace(spec, region=names[i % len(names)], steps=st_, ranks=sel))
    p = replace(params, imbalance=tuple(fixed))
    ops = generate(p, n, seed=seed)
    check_ledger(ops)
    check_p2p_balance(ops)
    base = generate(params, n, seed=seed)
    injected = ops.excess.sum() - base.excess.sum()
    assert injected >= -1e-9
    # removing every cause gives the balanced table back (value - excess), structure unchanged
    stripped = ops.without_causes(np.ones(len(ops.ledger), dtype=bool))
    assert np.array_equal(stripped.code, base.code)
    assert (stripped.excess == 0).all()


# ----------------------------------------------------------------------------------------------------------------
# TOML validation


def _err(kind: str, data: dict[str, object], match: str) -> InputError:
    with pytest.raises(InputError, match=match) as info:
        params_from_mapping(kind, data, "s.toml")
    assert str(info.value).startswith("s.toml: ")
    return info.value


def test_params_from_mapping_builds_every_kind() -> None:
    for kind, cls in APPLICATIONS.items():
        p = params_from_mapping(kind, {"kind": kind, "steps": 2}, "s.toml")
        assert type(p) is cls and p.steps == 2
    p = params_from_mapping("lared_s", {
        "visit_seconds": 1, "grid": [32, 30], "eos_baseline": "min",
        "imbalance": [{"region": "EOS_Match>If_970", "ranks": {"fraction": 0.1}, "distribution": "normal",
                       "magnitude": 2, "steps": [0, 2], "redraw": True, "spread": 0.5}],
    }, "s.toml")
    assert isinstance(p, LaredSParams)
    assert p.visit_seconds == 1.0 and isinstance(p.visit_seconds, float) and p.grid == (32, 30)
    imb = p.imbalance[0]
    assert imb.selection == RankSelection("fraction", fraction=0.1) and imb.steps == (0, 2) and imb.magnitude == 2.0
    w = params_from_mapping("wavefront", {"corners": ["nw", "se"]}, "s.toml")
    assert isinstance(w, WavefrontParams) and w.corners == ("nw", "se")


def test_params_from_mapping_errors() -> None:
    e = _err("jacobi", {}, "unknown application kind 'jacobi'")
    assert e.field == "application.kind" and "stencil" in e.fix and "wavefront" in e.fix
    e = _err("stencil", {"stpes": 3}, "unknown key")
    assert e.field == "application.stpes" and "steps" in e.fix and "halo_bytes" in e.fix
    e = _err("stencil", {"steps": "ten"}, "expected an integer")
    assert e.field == "application.steps"
    e = _err("stencil", {"steps": 2.5}, "expected an integer")
    e = _err("stencil", {"steps": True}, "expected an integer")
    e = _err("stencil", {"steps": 0}, "must be >= 1, got 0")
    e = _err("stencil", {"compute_seconds": -0.1}, "must be >= 0")
    assert e.field == "application.compute_seconds"
    e = _err("stencil", {"periodic": "yes"}, "expected true or false")
    e = _err("fft", {"alltoall_algorithm": "lam"}, "unknown algorithm 'lam'")
    assert "lam_simple" in e.fix and "ring" in e.fix
    e = _err("stencil", {"kind": "fft"}, "does not match")
    e = _err("lared_s", {"eos_baseline": "median"}, "must be one of")
    assert e.field == "application.eos_baseline"
    e = _err("matmul", {"matrix_size": 100, "block_columns": 7}, "must divide")
    assert e.field == "application.block_columns"
    e = _err("wavefront", {"corners": ["north"]}, "must be one of")
    assert e.field == "application.corners[0]"


def test_params_from_mapping_imbalance_errors() -> None:
    ok = {"region": "Stencil", "magnitude": 1.0}
    e = _err("stencil", {"imbalance": [ok, ok, {"region": "Stencil", "magnitude": -1}]}, "must be >= 0")
    assert e.field == "application.imbalance[2].magnitude"
    e = _err("stencil", {"imbalance": [{"region": "Stencil", "magnitude": "big"}]}, "expected a number")
    assert e.field == "application.imbalance[0].magnitude"
    e = _err("stencil", {"imbalance": [{"region": "Halo"}]}, "no region 'Halo'")
    assert e.field == "application.imbalance[0].region" and e.fix == "use one of: Stencil"
    e = _err("stencil", {"imbalance": [{"region": "Stencil", "distribution": "gauss"}]}, "must be one of")
    assert e.field == "application.imbalance[0].distribution" and "exponential" in e.problem
    e = _err("stencil", {"imbalance": [{"region": "Stencil", "colour": 1}]}, "unknown key")
    assert e.field == "application.imbalance[0].colour" and "magnitude" in e.fix
    e = _err("stencil", {"imbalance": [{"region": "Stencil", "ranks": {"random": 0}}]}, "whole number >= 1")
    assert e.field == "application.imbalance[0].ranks.random"
    e = _err("stencil", {"imbalance": [{"region": "Stencil", "ranks": [0, -2]}]}, "expected a rank")
    assert e.field == "application.imbalance[0].ranks[1]"
    e = _err("stencil", {"imbalance": [{"region": "Stencil", "ranks": "most"}]}, "unknown rank selection")
    e = _err("stencil", {"steps": 3, "imbalance": [{"region": "Stencil", "steps": [1, 3]}]}, "step 3 does not exist")
    assert e.field == "application.imbalance[0].steps"
    e = _err("stencil", {"imbalance": [{"region": "Stencil", "steps": "first"}]}, "expected")
    assert e.field == "application.imbalance[0].steps"
    e = _err("stencil", {"imbalance": {"region": "Stencil"}}, "expected a list")
    assert e.field == "application.imbalance"
    e = _err("stencil", {"imbalance": ["Stencil"]}, "expected a table")
    assert e.field == "application.imbalance[0]"


def test_process_grid() -> None:
    assert process_grid(960) == (32, 30)
    assert process_grid(7) == (7, 1)
    assert process_grid(16) == (4, 4)
    with pytest.raises(ValueError, match="does not hold"):
        process_grid(6, (4, 2))
