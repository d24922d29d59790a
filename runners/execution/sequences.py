"""The runner's sequence numbers, normalized: duplicates dropped, gaps logged, bad ones
reassigned, and a merged delta (`runners.execution.deltas`) counted for every result in it."""

import logging

logger = logging.getLogger(__name__)


def runner_sequence(state, value, first=None) -> int | None:
    """Normalize the runner's sequence (of a merged delta: `first` to `value`); None means
    the result is a duplicate, dropped."""
    merged_to = None
    if isinstance(first, int) and isinstance(value, int) and 0 < first < value:
        value, merged_to = first, value
    if isinstance(value, bool) or not isinstance(value, int):
        if value is not None:
            logger.warning("run %s: non-integer sequence %r reassigned", state.run_id, value)
        value = state.last_runner_sequence + 1
    elif value <= 0:
        logger.warning("run %s: sequence %s reassigned", state.run_id, value)
        value = state.last_runner_sequence + 1
    elif value in state.seen_runner_sequences:
        logger.warning("run %s: duplicate sequence %s dropped", state.run_id, value)
        return None
    elif value != state.last_runner_sequence + 1:
        logger.warning("run %s: sequence gap before %s", state.run_id, value)
    end = merged_to or value
    state.seen_runner_sequences.update(range(value, end + 1))
    state.last_runner_sequence = max(state.last_runner_sequence, end)
    return end
