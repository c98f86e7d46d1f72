"""Invoking one handler: arity dispatch, validation, normalisation, encoding, isolation."""

from toolvisor.executor._budget import (
    MAX_ERROR_BYTES,
    OutputBudget,
    OutputProjection,
    ProjectionPoint,
    Truncation,
    keep_ends,
)
from toolvisor.executor._calls import CallHandle
from toolvisor.executor._deadlines import Deadline, DeadlineTimer
from toolvisor.executor._encoding import encode, encode_checked
from toolvisor.executor._execute import aexecute, execute
from toolvisor.executor._main_guard import check_main_guard
from toolvisor.executor._process_isolation import prepare_process_isolation
from toolvisor.executor._runner import ToolRunner
from toolvisor.executor._stats import RunnerStats
from toolvisor.executor._thread_pool import ElasticThreadPool, PoolThread
from toolvisor.executor._validation import prepare_arguments

__all__ = [
    "MAX_ERROR_BYTES",
    "CallHandle",
    "Deadline",
    "DeadlineTimer",
    "ElasticThreadPool",
    "OutputBudget",
    "OutputProjection",
    "PoolThread",
    "ProjectionPoint",
    "RunnerStats",
    "ToolRunner",
    "Truncation",
    "aexecute",
    "check_main_guard",
    "encode",
    "encode_checked",
    "execute",
    "keep_ends",
    "prepare_arguments",
    "prepare_process_isolation",
]
