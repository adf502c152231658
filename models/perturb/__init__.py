"""Perturbation models: system noise, instrumentation overhead, trace buffers, spilling policies, condition C."""
