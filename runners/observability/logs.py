"""Structured logs: with `LANGHOST_LOG_FORMAT=json`, one JSON object a line, each written while
a run executes carrying its `run_id`, `conversation_id`, `agent` and `trace_id` (the run's id:
its trace in the ledger).

The run's ids live in a context variable the orchestrator sets for the run's task: what the
run does in other tasks and threads it starts (its journal, its database work) inherits it.
"""

import contextvars
import logging

from pythonjsonlogger.json import JsonFormatter

RUN_FIELDS = ("run_id", "conversation_id", "agent", "trace_id")
_run: contextvars.ContextVar[dict | None] = contextvars.ContextVar("langhost_run", default=None)


def enter_run(run_id: str, conversation_id: str | None, agent: str) -> contextvars.Token:
    """From now on in this context, log lines carry this run's ids (`leave_run` ends it)."""
    return _run.set({"run_id": run_id, "conversation_id": conversation_id or "",
                     "agent": agent, "trace_id": run_id})


def leave_run(token: contextvars.Token) -> None:
    try:
        _run.reset(token)
    except ValueError:  # a run's stream closed from another context: that one never had it
        pass


class RunContext(logging.Filter):
    """Adds the current run's ids to each record (empty outside a run)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = _run.get() or {}
        for name in RUN_FIELDS:
            setattr(record, name, ids.get(name, ""))
        return True


class JsonLines(JsonFormatter):
    """A record as one JSON line: time, level, logger, message, the run's ids when in a run,
    and the exception's traceback when there is one."""

    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s",
                         rename_fields={"asctime": "time", "levelname": "level",
                                        "name": "logger"})

    def add_fields(self, log_data: dict, record: logging.LogRecord, message: dict) -> None:
        super().add_fields(log_data, record, message)
        for name in RUN_FIELDS:
            if not getattr(record, name, ""):
                log_data.pop(name, None)
