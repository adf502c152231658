"""Install the top-level folders under the single import name ``waitlab``."""

from setuptools import setup

setup(
    packages=[
        "waitlab",
        "waitlab.simulator",
        "waitlab.models",
        "waitlab.platforms",
        "waitlab.experiments",
        "waitlab.models.apps",
        "waitlab.models.perturb",
        "waitlab.models.analysis",
        "waitlab.experiments.reproduce",
        "waitlab.experiments.diagnosis",
        "waitlab.experiments.diagnosis.builtin_suite",
        "waitlab.experiments.report",
        # data folders, named as packages so setuptools does not warn that it would ignore them
        "waitlab.platforms.data",
        "waitlab.simulator.native",
    ],
    package_dir={
        "waitlab": "waitlab",
        "waitlab.simulator": "simulator",
        "waitlab.models": "models",
        "waitlab.platforms": "platforms",
        "waitlab.experiments": "experiments",
        "waitlab.models.apps": "models/apps",
        "waitlab.models.perturb": "models/perturb",
        "waitlab.models.analysis": "models/analysis",
        "waitlab.experiments.reproduce": "experiments/reproduce",
        "waitlab.experiments.diagnosis": "experiments/diagnosis",
        "waitlab.experiments.diagnosis.builtin_suite": "experiments/diagnosis/builtin_suite",
        "waitlab.experiments.report": "experiments/report",
        "waitlab.platforms.data": "platforms/data",
        "waitlab.simulator.native": "simulator/native",
    },
    package_data={
        "waitlab.simulator.native": ["*.cpp", "*.c", "*.h", "*.hpp", "*.inc"],
        "waitlab.platforms.data": ["*.toml"],
        "waitlab.experiments": ["scenarios/*.toml"],
        "waitlab.experiments.reproduce": ["*.c"],
        "waitlab.experiments.diagnosis.builtin_suite": ["*.toml", "*.c"],
        "waitlab.experiments.report": ["*.js"],
    },
)
