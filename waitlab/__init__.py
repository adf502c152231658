"""waitlab: wait propagation in bulk-synchronous MPI programs, simulated with SimGrid SMPI."""

from waitlab.errors import EnvironmentProblem, InputError, SimulationError, WaitlabError

__version__ = "0.1.0"

__all__ = ["EnvironmentProblem", "InputError", "SimulationError", "WaitlabError", "__version__"]
