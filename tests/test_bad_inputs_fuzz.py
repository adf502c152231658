"""Fuzzing the scenario and trace parsers: whatever the bytes, the only exception is waitlab's InputError."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import tomli_w
from bad_inputs_corpus import GOOD
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from waitlab.errors import InputError
from waitlab.experiments.scenario import from_mapping, load_scenario
from waitlab.models.analysis.trace_check import first_mismatch
from waitlab.models.vocabulary import ACTIONS
from waitlab.simulator.ti_trace import parse_ti_trace

FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True),
                    st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8),
                                                                                             inner, max_size=3),
                      max_leaves=6)
KEYS = {
    "scenario": ["name", "ranks", "seed", "description", "x"],
    "platform": ["name", "nodes", "ranks_per_node", "split_cores"],
    "application": ["kind", "steps", "halo_bytes", "dims", "imbalance", "compute_seconds", "trace", "sources"],
    "simulation": ["alltoall", "timeout", "config", "reference_core_speed"],
    "noise": ["model", "frequency", "duration", "file", "period", "jitter_std"],
    "tracing": ["policy", "buffer_bytes", "memory", "every"],
}


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, object]:
    data: dict[str, object] = tomllib.loads(GOOD)
    for _ in range(draw(st.integers(1, 4))):
        section = draw(st.sampled_from(sorted(KEYS)))
        table = data.setdefault(section, {})
        assert isinstance(table, dict)
        table[draw(st.sampled_from(KEYS[section]))] = draw(values)
    return data


@FUZZ
@given(scenarios())
def test_mutated_scenarios_give_input_errors_only(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("fuzz")
    try:
        from_mapping(data, str(folder / "s.toml"))
    except InputError as exc:
        assert exc.field and "\n" not in str(exc)[:200]


@FUZZ
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_scenario_bytes_give_input_errors_only(tmp_path_factory, raw):
    p = Path(tmp_path_factory.mktemp("fuzz")) / "s.toml"
    p.write_bytes(GOOD.encode()[: len(GOOD) // 2] + raw)
    try:
        load_scenario(p)
    except InputError:
        pass


@FUZZ
@given(scenarios())
def test_scenarios_written_back_as_toml_read_the_same(tmp_path_factory, data):
    p = Path(tmp_path_factory.mktemp("fuzz")) / "s.toml"
    try:
        p.write_text(tomli_w.dumps(data))
    except (TypeError, ValueError):  # None or NaN-keyed data has no TOML spelling
        return
    try:
        load_scenario(p)
    except InputError:
        pass


tokens = st.one_of(st.integers(-5, 10).map(str), st.sampled_from(["1e30", "nan", "inf", "-0", "1.5", "x", "-333",
                                                                   "6", "999"]))
lines = st.tuples(st.integers(-1, 3), st.sampled_from([*ACTIONS, "bogus", "Isend", "ssend"]),
                  st.lists(tokens, max_size=6)).map(lambda t: " ".join([str(t[0]), t[1], *t[2]]))


@FUZZ
@given(st.lists(lines, max_size=25), st.booleans())
def test_trace_lines_give_input_errors_only(tmp_path_factory, body, newline):
    p = Path(tmp_path_factory.mktemp("fuzz")) / "trace.txt"
    p.write_text("\n".join(body) + ("\n" if newline else ""))
    try:
        parsed = parse_ti_trace(p, flops_per_second=1e9, n_ranks=3)
    except InputError:
        return
    problem = first_mismatch(parsed.ops)
    assert problem is None or (problem[0] in ("collectives", "messages", "deadlock") and problem[1])


def test_a_key_with_a_line_break_is_named_quoted_on_one_line(tmp_path):
    # found by the fuzz test: a SimGrid setting named "\n" made the location span two lines
    data = {"scenario": {"name": "tiny", "ranks": 4}, "platform": {"name": "dawning_5000a"},
            "application": {"kind": "stencil", "steps": 3}, "simulation": {"config": {"\n": None}}}
    with pytest.raises(InputError) as err:
        from_mapping(data, str(tmp_path / "s.toml"))
    assert err.value.field == 'simulation.config."\\n"' and "\n" not in str(err.value)
