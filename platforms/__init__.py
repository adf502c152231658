"""Machine descriptions (data files) and their rendering to SimGrid XML."""

from waitlab.platforms.model import (
    DiskSpec,
    Figure,
    LinkSpec,
    NodeSpec,
    PlatformModel,
    TopologySpec,
    describe_platform,
    list_platforms,
    load_platform,
)
from waitlab.platforms.render import RenderedPlatform, render_platform

__all__ = [
    "DiskSpec",
    "Figure",
    "LinkSpec",
    "NodeSpec",
    "PlatformModel",
    "RenderedPlatform",
    "TopologySpec",
    "describe_platform",
    "list_platforms",
    "load_platform",
    "render_platform",
]
