"""Everything a person looks at: the shared palette, figures, Markdown reports and the offline HTML report.

One palette (:mod:`waitlab.experiments.report.palette`) colours every figure and ``report.html``.
"""
