"""Install the top-level folders under the single import name ``waitlab``."""

from setuptools import setup

setup(
    packages=[
        "waitlab",
        "waitlab.simulator",
        "waitlab.models",
        "waitlab.platforms",
        "waitlab.experiments",
    ],
    package_dir={
        "waitlab": "waitlab",
        "waitlab.simulator": "simulator",
        "waitlab.models": "models",
        "waitlab.platforms": "platforms",
        "waitlab.experiments": "experiments",
    },
    package_data={
        "waitlab.simulator": ["native/*.cpp", "native/*.c", "native/*.h"],
        "waitlab.platforms": ["data/*.toml"],
        "waitlab.experiments": ["scenarios/*.toml"],
    },
)
