"""The numbers that the lab pages (docs/lab/) quote, measured from the commands those pages tell a student to run.

A lab page writes a measured number as a MyST substitution, ``{{ ex2_wait }}``; the docs build (docs/conf.py) fills
it from ``docs/lab/numbers.json``.  This module runs every command of the lab's *Run* sections (the exercises' runs,
diagnoses and sweeps, about two minutes of SimGrid on two cores; the 1,024-rank point of exercise 3 is most of it)
in a scratch folder, reads the numbers from what those commands print and write (the summary lines,
``perturbation.txt``, ``diagnosis/diagnosis.md``, ``ranks.csv``, ``sweep.csv``, ``waitlab check-c``), formats each
as the output shows it, and returns them.  ``tests/test_lab_numbers.py`` compares a fresh :func:`measure` with
``numbers.json``: when a change to waitlab moves a number, that test fails until the file is measured again::

    .venv/bin/python docs/lab_numbers.py     # rewrites docs/lab/numbers.json (never edit it by hand)

Numbers the pages derive by hand from a scenario's inputs (15 ranks x 3 steps x 4 ms) stay in the text.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import tempfile
from pathlib import Path

import pandas as pd

from waitlab import cli

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path("results")  # as on the pages: the commands run in a scratch folder holding a link to examples/
NUMBERS = ROOT / "docs" / "lab" / "numbers.json"


#: The commands :func:`measure` ran, as a page writes them (``waitlab run examples/... -o results/ex1``).
RAN: list[str] = []


def waitlab(*argv: str | Path) -> str:
    """Run one ``waitlab`` command in this process; what it printed (stdout, then stderr).  A failing command
    raises."""
    RAN.append(" ".join(["waitlab", *map(str, argv)]))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main([str(a) for a in argv])
    # check-c exits 1 when condition C is violated: that is an answer, not a failure
    if status not in (0, 1) or (status == 1 and argv[0] != "check-c"):
        raise RuntimeError(f"waitlab {' '.join(map(str, argv))} exited {status}: {err.getvalue()[-2000:]}")
    return out.getvalue() + err.getvalue()


def find(pattern: str, text: str, what: str, flags: int = re.M) -> re.Match[str]:
    """The first match of ``pattern`` (multi-line) in ``text``; an error naming ``what`` when there is none."""
    m = re.search(pattern, text, flags)
    if m is None:
        raise ValueError(f"{what}: no line matches {pattern!r}")
    return m


def model_section(md: str, model: str) -> str:
    """The part of diagnosis.md under ``### <model>`` (up to the next heading)."""
    return find(rf"^### {re.escape(model)}\n(.*?)(?=^##)", md, f"diagnosis.md, model {model}", re.M | re.S).group(1)


def table_row(md: str, first: str, what: str) -> list[str]:
    """The cells of the first Markdown table row whose first cell is ``first``."""
    m = find(rf"^\| {re.escape(first)} \|(.*)\|\s*$", md, what)
    return [c.strip() for c in m.group(1).split("|")]


def blamed(md: str, model: str, region: str) -> tuple[str, str]:
    """(seconds, share) that ``model`` blames on ``region`` in diagnosis.md."""
    cells = table_row(model_section(md, model), f"`{region}`", f"diagnosis.md, {model} on {region}")
    return cells[0], cells[1]


def truth(md: str) -> tuple[str, str]:
    """(removed, total) of the ground truth's first sentence in diagnosis.md."""
    m = find(r"Removing every injected cause removes (\S+) s of the (\S+) s of wait", md, "diagnosis.md, ground truth")
    return m.group(1), m.group(2)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f}"


def perturbation(text: str) -> dict[str, str]:
    """The numbers of one ``perturbation.txt``."""
    mk = find(r"^makespan: unperturbed (\S+) s, measured (\S+) s \(\+(\S+) s, x(\S+)\)", text, "perturbation.txt")
    tw = find(r"^total wait: unperturbed (\S+) s, measured (\S+) s", text, "perturbation.txt")
    out = {"makespan_before": mk.group(1), "makespan_after": mk.group(2), "makespan_ratio": mk.group(4),
           "wait_before": tw.group(1), "wait_after": tw.group(2)}
    inj = find(r"^injected: noise (\S+) s, overhead (\S+) s, swap (\S+) s, flush (\S+) s", text, "perturbation.txt")
    out.update(noise=inj.group(1), overhead=inj.group(2), swap=inj.group(3), flush=inj.group(4))
    for pattern in ("late_sender", "wait_at_nxn"):
        m = re.search(rf"^  {pattern}: unperturbed (\S+) s -> measured (\S+) s", text, re.M)
        if m:
            out[f"{pattern}_before"], out[f"{pattern}_after"] = m.group(1), m.group(2)
    hits = re.search(r"(\d+) detour hits delayed (\S+) s of work", text)
    if hits:
        out["hits"], out["hit_seconds"] = hits.group(1), hits.group(2)
    rec = re.search(r"^instrumentation: (\d+) records, (\S+) MiB", text, re.M)
    if rec:
        out["records"], out["record_mib"] = rec.group(1), rec.group(2)
    spill = re.search(r"^spilling policy \S+: (\d+) flushes \((\d+) synchronised, (\d+) individual\), (\S+) MiB "
                      r"written in (\S+) s \(pads (\S+) s\), (\S+) MiB swapped; P1 \(no swapping\) (\w+)", text, re.M)
    if spill:
        for i, key in enumerate(("flushes", "synchronised", "individual", "written_mib", "flush_seconds", "pads",
                                 "swapped_mib", "p1"), start=1):
            out[key] = spill.group(i)
    for which, key in (("all tracer overhead", "c_all"), ("spilling only: swap, flush, pads", "c_spill")):
        m = find(rf"^condition C \({re.escape(which)}\): (.*)$", text, "perturbation.txt, condition C")
        line = m.group(1)
        out[key] = "holds" if line == "holds" else "violated"
        v = re.match(r"violated by (\d+)/(\d+) pairs and (\d+)/(\d+) collectives, max difference (\S+) s", line)
        if v:
            out[f"{key}_pairs"], out["pairs"], out[f"{key}_collectives"], out["collectives"] = v.group(1, 2, 3, 4)
            out[f"{key}_max"] = v.group(5)
    dist = find(r"^wait distortion: (\d+) wait states, total \+?(\S+) s", text, "perturbation.txt, distortion")
    out["distortion"] = dist.group(2)
    return out


def sweep_folder(folder: Path, key: str, value: object) -> Path:
    """The run folder of the sweep point whose ``key`` equals ``value``."""
    table = pd.read_csv(folder / "sweep.csv")
    (h,) = table.loc[table[key] == value, "scenario_hash"]
    return folder / "runs" / str(h)


def exercise1(n: dict[str, str]) -> None:
    out = waitlab("run", "examples/lab_alltoall_imbalance.toml", "-o", RESULTS / "ex1")
    waitlab("diagnose", RESULTS / "ex1")
    n["ex1_wait"] = find(r"^wait by pattern: wait_at_nxn (\S+) s \(100\.0%\)$", out, "ex1 summary").group(1)
    makespan = float(find(r"^makespan (\S+) s", out, "ex1 summary").group(1))
    n["ex1_makespan_ms"] = ms(makespan)
    ranks = pd.read_csv(RESULTS / "ex1" / "ranks.csv").set_index("rank")["wait"]
    n["ex1_rank3_wait_ms"] = ms(float(ranks[3]))
    others = ranks.drop(3)
    if float(others.max() - others.min()) > 5e-5:
        raise ValueError("ex1: the 15 other ranks no longer wait alike (the page gives one figure)")
    n["ex1_other_wait_ms"] = ms(float(others.mean()))
    md = (RESULTS / "ex1" / "diagnosis" / "diagnosis.md").read_text(encoding="utf-8")
    models = ("CWP-DM", "H-CWP-DM (earliest)", "H-CWP-DM (each)")
    shares = {blamed(md, m, "FFT_x")[1] for m in models}
    (n["ex1_fftx_share"],) = shares  # the page says all three models agree: one share, or this fails
    for m in models:  # ... and that they blame rank 3 alone
        find(r"^Most blamed \(rank, region\): \(3, `FFT_x`\) \S+ s$", model_section(md, m), f"ex1 {m} on rank 3")
    n["ex1_truth"], n["ex1_truth_total"] = truth(md)
    n["ex1_makespan_gain"] = table_row(md, "CWP-DM | `FFT_x`", "ex1 improvement")[-1]


def exercise2(n: dict[str, str]) -> None:
    out = waitlab("run", "examples/wavefront_propagation.toml", "-o", RESULTS / "ex2")
    waitlab("diagnose", RESULTS / "ex2")
    m = find(r"^wait by pattern: late_sender (\S+) s \(100\.0%\)$", out, "ex2 summary")
    n["ex2_wait"] = m.group(1)
    find(r"^wait by MPI operation: recv \S+ s \(100\.0%\)$", out, "ex2 summary: all the wait in recv")
    makespan = float(find(r"^makespan (\S+) s", out, "ex2 summary").group(1))
    n["ex2_makespan"] = f"{makespan:.3f}"
    ranks = pd.read_csv(RESULTS / "ex2" / "ranks.csv").set_index("rank")["wait"]
    n["ex2_rank1_wait"], n["ex2_rank15_wait"] = f"{float(ranks[1]):.3f}", f"{float(ranks[15]):.3f}"
    if abs(float(ranks[15]) / float(ranks[1]) - 2) > 0.05:
        raise ValueError("ex2: rank 15 no longer waits twice as long as rank 1 (the solution says it does)")
    total = float(n["ex2_wait"])
    n["ex2_ratio"] = f"{total / 0.04:.0f}"  # the injected excess: 2 steps x 20 ms (the scenario's input)
    md = (RESULTS / "ex2" / "diagnosis" / "diagnosis.md").read_text(encoding="utf-8")
    n["ex2_truth"], _ = truth(md)
    n["ex2_fill"] = f"{total - float(n['ex2_truth']):.2f}"
    # exercise 4 reads the same diagnosis
    n["ex4_cwp_sweep"], n["ex4_cwp_sweep_share"] = blamed(md, "CWP-DM", "Sweep")
    n["ex4_cwp_recv"], _ = blamed(md, "CWP-DM", "MPI_Recv")
    n["ex4_h_sweep"], n["ex4_h_sweep_share"] = blamed(md, "H-CWP-DM (earliest)", "Sweep")
    n["ex4_h_recv"], n["ex4_h_recv_share"] = blamed(md, "H-CWP-DM (earliest)", "MPI_Recv")
    n["ex4_cwp_rank0"] = find(r"^Most blamed \(rank, region\): \(0, `Sweep`\) (\S+) s,", model_section(md, "CWP-DM"),
                              "ex4 CWP-DM's most blamed pair").group(1)
    if blamed(md, "H-CWP-DM (each)", "Sweep")[0] != n["ex4_h_sweep"]:
        raise ValueError("ex4: the two H-CWP-DM pairings no longer agree on Sweep (the page says they do)")
    cwp = table_row(md, "CWP-DM", "ex4 scores")
    n["ex4_cwp_total_error"], n["ex4_cwp_false_blame"] = cwp[4], cwp[5]
    h = table_row(md, "H-CWP-DM (earliest)", "ex4 scores")
    n["ex4_h_total_error"], n["ex4_h_false_blame"] = h[4], h[5]
    imp = table_row(md, "CWP-DM | `Sweep`", "ex4 improvement")
    n["ex4_cwp_predicted"], n["ex4_realized"], n["ex4_makespan_gain"] = imp[0], imp[1], imp[2]
    n["ex4_h_predicted"] = table_row(md, "H-CWP-DM (earliest) | `Sweep`, `MPI_Recv`", "ex4 improvement")[0]


def exercise3(n: dict[str, str]) -> None:
    waitlab("run", "examples/noise_only.toml", "-o", RESULTS / "ex3")
    p = perturbation((RESULTS / "ex3" / "perturbation.txt").read_text(encoding="utf-8"))
    for key in ("makespan_before", "makespan_after", "makespan_ratio", "wait_before", "wait_after", "hits",
                "hit_seconds", "wait_at_nxn_after", "late_sender_after"):
        n[f"ex3_{key}"] = p[key]
    if p["c_all"] != p["c_spill"]:
        raise ValueError("ex3: the two condition C lines differ (the page quotes one answer for both)")
    n["ex3_c"] = p["c_all"]
    waitlab("sweep", "examples/noise_scaling.toml", "-o", RESULTS / "noise-scaling")
    for ranks, tag in ((16, "ex3_node"), (1024, "ex3_big")):
        q = perturbation((sweep_folder(RESULTS / "noise-scaling", "scenario.ranks", ranks) / "perturbation.txt")
                         .read_text(encoding="utf-8"))
        for key in ("makespan_before", "makespan_after", "makespan_ratio", "wait_before", "wait_after"):
            n[f"{tag}_{key}"] = q[key]
    n["ex3_node_growth"] = f"{float(n['ex3_node_makespan_ratio']) - 1:.1%}"
    n["ex3_big_wait_per_rank_ms"] = f"{float(n['ex3_big_wait_after']) / 1024 * 1e3:.0f}"


def exercise4(n: dict[str, str]) -> None:
    waitlab("sweep", "examples/wavefront_whatif.toml", "-o", RESULTS / "wavefront-whatif")
    table = pd.read_csv(RESULTS / "wavefront-whatif" / "sweep.csv")
    waits = {f"{w:.2f}" for w in table["total_wait"]}
    (n["ex4_sweep_wait"],) = waits  # the page says the total wait is the same at every point: one value, or this fails
    span = table.groupby("application.blocks")["makespan"]
    for blocks, mk in span.mean().items():
        n[f"ex4_sweep_makespan_{blocks}"] = f"{mk:.3f}"
    n["ex4_sweep_machines_us"] = f"{float((span.max() - span.min()).max()) * 1e6:.0f}"


def exercise5(n: dict[str, str]) -> None:
    waitlab("run", "examples/lab_tracing.toml", "-o", RESULTS / "ex5")
    p = perturbation((RESULTS / "ex5" / "perturbation.txt").read_text(encoding="utf-8"))
    for key in ("records", "record_mib", "flushes", "written_mib", "flush_seconds", "wait_before", "wait_after",
                "late_sender_after", "wait_at_nxn_after", "makespan_before", "makespan_after", "makespan_ratio",
                "c_all", "c_spill"):
        n[f"ex5_{key}"] = p[key]
    if p["individual"] != p["flushes"]:
        raise ValueError("ex5: per_rank flushes are no longer all individual (the page says they are)")
    n["ex5_flush_ms"] = ms(float(p["flush_seconds"]) / int(p["flushes"]))
    for extra, key in (((), "all"), (("--kinds", "swap,flush,delay"), "spill")):
        check = waitlab("check-c", RESULTS / "ex5", *extra)
        m = find(r"^condition C is violated by (\d+) of (\d+) point-to-point pairs and (\d+) of (\d+) collective "
                 r"instances; largest difference (\S+) s; first break at rank (\d+) event (\d+) \((\w+)\) against "
                 r"rank (\d+) event (\d+), difference (\S+) s", check, f"ex5 check-c {' '.join(extra)}")
        for i, name in enumerate(("pairs", "of_pairs", "collectives", "of_collectives", "max", "rank", "event", "op",
                                  "peer", "peer_event", "difference"), start=1):
            n[f"ex5_check_{key}_{name}"] = m.group(i)
    waitlab("sweep", "examples/lab_tracing_policies.toml", "-o", RESULTS / "ex5-policies")
    for policy in ("keep", "per_rank", "vampir_sync", "predictive_sync"):
        q = perturbation((sweep_folder(RESULTS / "ex5-policies", "tracing.policy", policy) / "perturbation.txt")
                         .read_text(encoding="utf-8"))
        for key in ("makespan_after", "wait_after", "swap", "flush", "c_spill", "flushes", "individual",
                    "swapped_mib", "p1", "distortion"):
            n[f"ex5_{policy}_{key}"] = q[key]
    flushing = ("per_rank", "vampir_sync", "predictive_sync")
    # the solution says: predictive_sync flushes longest and still ends first among the flushing policies
    if max(flushing, key=lambda p: float(n[f"ex5_{p}_flush"])) != "predictive_sync" or \
            min(flushing, key=lambda p: float(n[f"ex5_{p}_makespan_after"])) != "predictive_sync":
        raise ValueError("ex5: predictive_sync no longer has the most flush time and the shortest makespan")


def used_keys() -> set[str]:
    """The substitutions the lab pages use."""
    return {k for page in (ROOT / "docs" / "lab").glob("*.md")
            for k in re.findall(r"\{\{\s*(\w+)\s*\}\}", page.read_text(encoding="utf-8"))}


def measure(work: Path) -> dict[str, str]:
    """Every number the lab pages quote, keyed as the pages' substitutions; ``work`` is a scratch folder."""
    n: dict[str, str] = {}
    (work / "examples").symlink_to(ROOT / "examples")
    with contextlib.chdir(work):
        for exercise in (exercise1, exercise2, exercise3, exercise4, exercise5):
            exercise(n)
    used = used_keys()
    return {k: v for k, v in sorted(n.items()) if k in used}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="waitlab-lab-") as tmp:
        numbers = measure(Path(tmp))
    NUMBERS.write_text(json.dumps(numbers, indent=1) + "\n", encoding="utf-8")
    print(f"{len(numbers)} numbers written to {NUMBERS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
