"""``make demo``: the main job, on screen."""

from __future__ import annotations

from examples import executor_outcomes

if __name__ == "__main__":
    executor_outcomes.main()
