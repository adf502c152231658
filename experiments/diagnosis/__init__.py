"""The diagnosis workbench: models behind one protocol, counterfactual truth, scoring, the benchmark suite.

* :mod:`~waitlab.experiments.diagnosis.diagnose`: ``waitlab diagnose`` (run the models on one run, score them);
* :mod:`~waitlab.experiments.diagnosis.groundtruth`: the counterfactual truth (re-runs without causes, cached);
* :mod:`~waitlab.experiments.diagnosis.registry`: the model registry (built-in models, entry points, plug-ins);
* :mod:`~waitlab.experiments.diagnosis.check`: ``check_model``, the conformance checker of a model;
* :mod:`~waitlab.experiments.diagnosis.suite` and :mod:`~waitlab.experiments.diagnosis.evaluate`: the
  benchmark suite with known truth and its leaderboard (``waitlab evaluate``).
"""
