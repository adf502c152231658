"""Sphinx configuration for waitlab (built with -W: warnings are errors)."""

from pathlib import Path

from waitlab.experiments.schema_reference import reference_markdown

# The scenario reference is generated from the one schema declaration (docs/scenarios.md includes it).
_generated = Path(__file__).parent / "_generated"
_generated.mkdir(exist_ok=True)
(_generated / "schema_reference.md").write_text(reference_markdown(), encoding="utf-8")

project = "waitlab"
author = "waitlab developers"
copyright = "2026, waitlab developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "numpydoc", "sphinx.ext.mathjax"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
exclude_patterns = ["_build", "_generated"]
html_theme = "alabaster"
numpydoc_show_class_members = False
numpydoc_validation_checks: set[str] = set()
autodoc_typehints = "none"
suppress_warnings = ["myst.header"]
