"""Running handlers: the ``ToolRunner``, its isolations, deadlines, pools and worker processes."""

from toolvisor.executor._calls import CallHandle
from toolvisor.executor._deadlines import Deadline, DeadlineTimer
from toolvisor.executor._main_guard import check_main_guard
from toolvisor.executor._process_isolation import prepare_process_isolation
from toolvisor.executor._runner import ToolRunner
from toolvisor.executor._stats import RunnerStats
from toolvisor.executor._thread_pool import ElasticThreadPool, PoolThread

__all__ = [
    "CallHandle",
    "Deadline",
    "DeadlineTimer",
    "ElasticThreadPool",
    "PoolThread",
    "RunnerStats",
    "ToolRunner",
    "check_main_guard",
    "prepare_process_isolation",
]
