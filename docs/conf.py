"""Sphinx configuration for waitlab (built with -W: warnings are errors)."""

project = "waitlab"
author = "waitlab developers"
copyright = "2026, waitlab developers"
extensions = ["myst_parser", "sphinx.ext.autodoc", "numpydoc", "sphinx.ext.mathjax"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
exclude_patterns = ["_build"]
html_theme = "alabaster"
numpydoc_show_class_members = False
numpydoc_validation_checks: set[str] = set()
autodoc_typehints = "none"
suppress_warnings = ["myst.header"]
