"""toolvisor's test suite: one folder per package of ``toolvisor/`` (and per top-level module),
``project/`` for the checks of the project as a whole, ``support/`` for what tests share and
``programs/`` for the programs they start as child processes."""
