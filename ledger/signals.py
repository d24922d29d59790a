"""What the ledger tells whoever listens (metrics, traces), each once its transaction has
committed: a rolled back write tells nothing."""

from django.db import transaction
from django.dispatch import Signal

# A run began executing: `run` holds its `run_id`, `runner_id` and `agent_id`.
run_started = Signal()
# A run ended: `run` holds its `run_id`, `runner_id`, `agent_id`, terminal `status`,
# `created_at`, `started_at` (None if it never ran) and `finished_at`.
run_ended = Signal()
# Model calls were recorded: `rows`, the `ModelCall` fields of each, as inserted.
model_calls_recorded = Signal()


def send_on_commit(signal: Signal, **kwargs) -> None:
    transaction.on_commit(lambda: signal.send(sender=None, **kwargs))
