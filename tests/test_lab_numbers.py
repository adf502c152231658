"""The lab pages (docs/lab/) quote what the lab's commands print.

A page writes a measured number as a MyST substitution (``{{ ex2_wait }}``) that the docs build fills from
``docs/lab/numbers.json``.  The slow test runs every command of the pages' *Run* blocks (docs/lab_numbers.py,
about two minutes on two cores, most of it exercise 3's 1,024-rank point) and fails when a number differs from the
file: re-measure with ``.venv/bin/python docs/lab_numbers.py`` and read the pages again, never edit the file.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from docs_scripts import docs_script

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "docs" / "lab"
SUB = re.compile(r"\{\{\s*(\w+)\s*\}\}")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
#: Commands of the Run blocks that print no number the pages quote.
UNMEASURED = re.compile(r"^waitlab (plot|report) |^cat ")


def lab_numbers() -> ModuleType:
    return docs_script("lab_numbers")


def pages() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(LAB.glob("*.md"))}


def stored() -> dict[str, str]:
    return json.loads((LAB / "numbers.json").read_text(encoding="utf-8"))


def page_commands() -> set[str]:
    """The commands of the pages' ``sh`` blocks, as ``waitlab ...`` (no venv prefix, no comment)."""
    out = set()
    for text in pages().values():
        for lang, body in FENCE.findall(text):
            if lang != "sh":
                continue
            for line in body.splitlines():
                cmd = re.sub(r"\s+#.*$", "", line).strip().removeprefix(".venv/bin/")
                if cmd:
                    out.add(re.sub(r"\s+", " ", cmd))
    return out


def test_every_substitution_is_measured():
    numbers = stored()
    used = {key for text in pages().values() for key in SUB.findall(text)}
    assert used == lab_numbers().used_keys()
    assert sorted(used - numbers.keys()) == [], "a page uses a number missing from docs/lab/numbers.json"
    assert sorted(numbers.keys() - used) == [], "docs/lab/numbers.json holds numbers that no page shows"


def test_no_substitution_in_code():
    """MyST leaves ``{{ x }}`` alone inside code, where a reader would see the braces."""
    for name, text in pages().items():
        for _, body in FENCE.findall(text):
            assert not SUB.search(body), f"{name}: a substitution inside a code block"
        for span in re.findall(r"`[^`\n]+`", FENCE.sub("", text)):
            assert not SUB.search(span), f"{name}: a substitution inside {span}"


def test_the_parsers_read_a_perturbation_report():
    """The report format docs/lab_numbers.py reads, on a hand-written report (fails when the format drifts)."""
    text = (
        "perturbation report for scenario x\n"
        "makespan: unperturbed 0.100474 s, measured 0.239485 s (+0.139010 s, x2.3835)\n"
        "total wait: unperturbed 0.000214 s, measured 1.292885 s\n"
        "injected: noise 0.000000 s, overhead 0.013599 s, swap 0.000000 s, flush 0.921084 s, link 0.000000 s\n"
        "instrumentation: 1280 records, 7.579 MiB\n"
        "spilling policy per_rank: 20 flushes (0 synchronised, 20 individual), 4.894 MiB written in 0.921084 s "
        "(pads 0.000000 s), 0.000 MiB swapped; P1 (no swapping) holds\n"
        "condition C (all tracer overhead): violated by 472/480 pairs and 10/10 collectives, max difference "
        "0.0465016 s, first at rank 0 event 4 (isend)\n"
        "condition C (spilling only: swap, flush, pads): holds\n"
        "wait distortion: 182 wait states, total +1.292671 s, mean |d| 0.0071 s, max |d| 0.046 s\n"
        "  late_sender: unperturbed 0.000000 s -> measured 0.460803 s (+0.460803 s)\n")
    p = lab_numbers().perturbation(text)
    assert (p["makespan_after"], p["makespan_ratio"], p["wait_after"], p["flush"]) == \
        ("0.239485", "2.3835", "1.292885", "0.921084")
    assert (p["flushes"], p["individual"], p["p1"], p["records"]) == ("20", "20", "holds", "1280")
    assert (p["c_all"], p["c_all_pairs"], p["pairs"], p["c_all_max"], p["c_spill"]) == \
        ("violated", "472", "480", "0.0465016", "holds")
    assert (p["late_sender_after"], p["distortion"]) == ("0.460803", "1.292671")


@pytest.mark.simgrid
@pytest.mark.slow
def test_the_pages_numbers_are_what_the_lab_commands_print(tmp_path: Path):
    if shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed")
    module = lab_numbers()
    fresh = module.measure(tmp_path)
    # the numbers come from the commands the pages show, and every page command that prints a number ran
    ran = set(module.RAN)
    shown = page_commands()
    assert sorted(ran - shown) == [], "docs/lab_numbers.py ran a command that no Run block shows"
    assert sorted(c for c in shown - ran if not UNMEASURED.match(c)) == [], "a Run block's command was not measured"
    old = stored()
    drift = {k: (old.get(k), fresh.get(k)) for k in sorted(old.keys() | fresh.keys()) if old.get(k) != fresh.get(k)}
    assert drift == {}, ("the lab pages quote numbers that the lab's commands no longer print (page, run): "
                         f"{drift}; re-measure with `.venv/bin/python docs/lab_numbers.py` and re-read the pages")
