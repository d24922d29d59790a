"""A run's handle: the only way host-API handlers, model calls, tool calls and the built-in
agents act on a run while it executes.

The process that executes a run gives it a handle (`runners.execution.run.LocalRunHandle`);
a runtime worker answering host actions for a run that executes in a web process holds a
handle that forwards them there, on the run's own result stream
(`runners.runtime.worker.ForwardedRunHandle`). Either way, what the host did for the run lands
in its ledger and its live stream, in order with the runner's results.
"""

from typing import Protocol


class RunHandle(Protocol):
    run_id: str

    async def record(self, type_: str, data: dict) -> bool:
        """Record what the host did for the run (a tool call it asked for, a state write) as
        a host event. False when the run takes no more events (it ended)."""

    async def reply(self, message: dict) -> bool:
        """Record `message` as a `message.completed` of the run (its transcript included) and
        deliver it to the run's caller. False when the run takes no more events."""

    # LangBot's query variables of the run (a command's or a listener's `set_query_var`).
    query_vars: dict

    async def run_child(self, agent_type_id: str, name: str, text: str, variables: dict,
                        extra_config: dict | None = None) -> dict:
        """Run a step of the run (a workflow's): a run of that agent type, with this run as
        its parent, `text` its message, `variables` its persona's `{key}`s and
        `extra_config` added to its config; returns
        `{run_id, status, status_reason, reply, usage, completed}` once it ended."""

    def heard_by(self, plugin: str) -> bool:
        """Whether `plugin` ("author/name") listens to the run's events."""

    async def prompt(self, system: list[dict], history: list[dict]) -> tuple[list[dict],
                                                                              list[dict]]:
        """The built-in agent's system messages and conversation as the run's event listeners
        leave them (LangBot's `PromptPreProcessing`), before its first model call."""

    def journal_model_call(self, row: dict) -> bool:
        """Write the `ModelCall` row with the run's own results, when the call was made where
        the run's journal is (the built-in agent's calls); False when the caller must write
        it itself."""

    def stop(self, status: str, reason: str) -> None:
        """Stop the run now (cancelled, shut down), from any thread."""

    async def written(self) -> None:
        """Return once the run's row is in the ledger: a run may keep it back until its first
        results (`runners.execution.journal.Journal`), and a host action for it reads it."""
