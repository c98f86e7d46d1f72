"""One call of one handler: validate its arguments, run it, normalise and encode its result.

The contract every isolation keeps (``execute`` and ``aexecute`` run in-process; the runner's
backends run them in a thread, a worker process, an event loop or a Ray task), and what the
machine and the catalog use to check and encode results without running anything.
"""

from toolvisor.call._budget import (
    MAX_ERROR_BYTES,
    OutputBudget,
    OutputProjection,
    ProjectionPoint,
    Truncation,
    keep_ends,
)
from toolvisor.call._encoding import encode, encode_checked
from toolvisor.call._execute import aexecute, execute, from_exception, not_found
from toolvisor.call._validation import prepare_arguments

__all__ = [
    "MAX_ERROR_BYTES",
    "OutputBudget",
    "OutputProjection",
    "ProjectionPoint",
    "Truncation",
    "aexecute",
    "encode",
    "encode_checked",
    "execute",
    "from_exception",
    "keep_ends",
    "not_found",
    "prepare_arguments",
]
