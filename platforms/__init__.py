"""Machine descriptions (data files) and their rendering to SimGrid XML."""

from waitlab.platforms.describe import describe_platform
from waitlab.platforms.model import (
    DiskSpec,
    Figure,
    LinkSpec,
    NodeSpec,
    PlatformModel,
    TopologySpec,
    list_platforms,
    load_platform,
)
from waitlab.platforms.mpi_spec import MpiPoint, MpiSpec
from waitlab.platforms.render import RenderedPlatform, render_platform
from waitlab.platforms.smpi_factors import Calibration, calibrate

__all__ = [
    "Calibration",
    "DiskSpec",
    "Figure",
    "LinkSpec",
    "MpiPoint",
    "MpiSpec",
    "NodeSpec",
    "PlatformModel",
    "RenderedPlatform",
    "TopologySpec",
    "calibrate",
    "describe_platform",
    "list_platforms",
    "load_platform",
    "render_platform",
]
