"""Sphinx configuration for waitlab (built with -W: warnings are errors)."""

import json
import shutil
from pathlib import Path

from waitlab.experiments.schema_reference import reference_markdown

# The scenario reference is generated from the one schema declaration (docs/scenarios.md includes it).
_generated = Path(__file__).parent / "_generated"
_generated.mkdir(exist_ok=True)
(_generated / "schema_reference.md").write_text(reference_markdown(), encoding="utf-8")

project = "waitlab"
author = "waitlab developers"
copyright = "2026, waitlab developers"
# myst_nb parses Markdown as myst_parser does and also executes notebooks (docs/lab/notebook.ipynb).
extensions = ["myst_nb", "sphinx.ext.autodoc", "numpydoc", "sphinx.ext.mathjax"]
source_suffix = {".md": "myst-nb", ".rst": "restructuredtext", ".ipynb": "myst-nb"}
# Notebooks run at every build, so they cannot rot; an error in a cell fails the build.
nb_execution_mode = "force"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
myst_enable_extensions = ["dollarmath", "colon_fence", "substitution"]
# The lab pages' measured numbers ({{ ex2_wait }}): docs/lab_numbers.py measures them from the lab's own commands,
# tests/test_lab_numbers.py fails when a fresh measurement differs from the file.
myst_substitutions = json.loads((Path(__file__).parent / "lab" / "numbers.json").read_text(encoding="utf-8"))
myst_heading_anchors = 3
exclude_patterns = ["_build", "_generated", "_leaderboard"]  # _leaderboard: tables leaderboard.md includes
html_theme = "alabaster"
numpydoc_show_class_members = False
numpydoc_validation_checks: set[str] = set()
autodoc_typehints = "none"
suppress_warnings = ["myst.header"]

# MathJax served from the built docs (offline): the part of Debian's libjs-mathjax (MathJax 2, installed by
# scripts/bootstrap.sh) that TeX input with CommonHTML output needs, about 1.5 MB.
MATHJAX = Path("/usr/share/javascript/mathjax")
MATHJAX_PARTS = ("MathJax.js", "config/TeX-AMS_CHTML-full.js", "extensions", "jax/input/TeX", "jax/element",
                 "jax/output/CommonHTML", "fonts/HTML-CSS/TeX/woff", "localization/en")
if not (MATHJAX / "MathJax.js").is_file():
    raise RuntimeError(f"{MATHJAX}/MathJax.js is missing: apt-get install libjs-mathjax (scripts/bootstrap.sh does)")
_static = _generated / "static"
for part in MATHJAX_PARTS:
    src, dst = MATHJAX / part, _static / "mathjax" / part
    if dst.exists():
        continue
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy2(src, dst)
html_static_path = [str(_static)]
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS_CHTML-full"
# MathJax 2 reads its own configuration: typeset the spans Sphinx marks "math" even inside the sections MyST
# marks tex2jax_ignore (MyST's MathJax 3 setting would not reach MathJax 2).
myst_update_mathjax = False
mathjax2_config = {"tex2jax": {"processClass": "math|tex2jax_process|mathjax_process",
                               "ignoreClass": "tex2jax_ignore|mathjax_ignore"}}
# A wider column: code blocks of the README and the tutorial fit without horizontal scrolling.
html_theme_options = {"page_width": "1240px", "body_max_width": "none"}
