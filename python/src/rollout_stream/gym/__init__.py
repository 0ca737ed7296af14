"""Collecting rollouts from NeMo-Gym into the pipeline (SPEC §2.3).

``collect(tasks, N, batch_id, publisher=...)`` runs one step of rollouts
through NeMo-Gym's agent servers and publishes each result as it completes;
``python -m rollout_stream collect`` is the same from the command line.
"""

from .collector import CollectSummary, Failure, collect, collect_async, prepare_rows, read_tasks
from .published import published_row_indices
from .rollouts import GymUnavailableError, RolloutFailedError, open_runner

__all__ = [
    "CollectSummary",
    "Failure",
    "GymUnavailableError",
    "RolloutFailedError",
    "collect",
    "collect_async",
    "open_runner",
    "prepare_rows",
    "published_row_indices",
    "read_tasks",
]
