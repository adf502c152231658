"""Reproductions of the source papers: Wu et al. (LARED-S), Okita et al. (trace spilling), policy studies."""
