"""Checks of the project as a whole: the layers, the public API, the docs and README, the
exceptions table, the demo and the examples, the soak."""
