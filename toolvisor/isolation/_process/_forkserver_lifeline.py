"""Imported by the forkserver alone, first thing at its start (``_forkserver.PRELOAD``): from
then on the kernel kills it when the host's thread that started it ends (see
``_forkserver.py``). Its workers are forked with the setting cleared and ask for their own.

If the host died before this ran, the forkserver has no worker yet, so nothing but the host
held its "alive" pipe: it reads EOF there and exits by itself.
"""

from __future__ import annotations

import os

from toolvisor._lifeline import die_with_parent

die_with_parent(os.getppid())
