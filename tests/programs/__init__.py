"""Programs the tests start as child processes (``python -m tests.programs.NAME``, or
``module:function`` for ``toolvisor.cli``), and the file node preloads."""
