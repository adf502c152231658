"""Pure models over data: applications, perturbations, wait states, diagnosis. No SMPI, no file I/O."""
