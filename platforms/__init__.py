"""Machine descriptions (data files) and their rendering to SimGrid XML."""

from waitlab.platforms.describe import describe_platform
from waitlab.platforms.model import (
    PLATFORM_ALIASES,
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
from waitlab.platforms.placement import PLACEMENTS, Placement, place_ranks
from waitlab.platforms.render import RenderedPlatform, render_platform
from waitlab.platforms.smpi_factors import Calibration, calibrate

__all__ = [
    "PLACEMENTS",
    "PLATFORM_ALIASES",
    "Calibration",
    "DiskSpec",
    "Figure",
    "LinkSpec",
    "MpiPoint",
    "MpiSpec",
    "NodeSpec",
    "Placement",
    "PlatformModel",
    "RenderedPlatform",
    "TopologySpec",
    "calibrate",
    "describe_platform",
    "list_platforms",
    "load_platform",
    "place_ranks",
    "render_platform",
]
