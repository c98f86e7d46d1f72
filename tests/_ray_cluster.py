"""The test session's one local Ray cluster."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _warm_up() -> int:
    return 1


def start_cluster(temp_dir: Path) -> ModuleType:
    """Start a 2-CPU local cluster with its files in ``temp_dir``; fail (never skip) if not."""
    try:
        import ray  # noqa: PLC0415 - the optional extra
    except ImportError as exc:
        pytest.fail(f"Ray is not installed ({exc}); the dev extra installs toolvisor[ray]",
                    pytrace=False)
    try:
        ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(temp_dir),
                 log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
        ray.get(ray.remote(_warm_up).remote(), timeout=60)
    except Exception as exc:
        pytest.fail(f"a local Ray cluster cannot start: {type(exc).__name__}: {exc}",
                    pytrace=False)
    return ray
