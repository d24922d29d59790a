"""An eval set as its YAML file says it (the protocol's edge: pydantic), e.g.

    name: calculator basics
    judge_model: gpt-judge          # for `rubric` criteria: a model LangHost knows
    cases:
      - name: adds
        turns:                      # sent in one fresh conversation, in order
          - user: What is 2 + 3?
            expect:
              reply_contains: "5"   # or a list: every one of them; `reply_exact` for all of it
              tool_calls: [add]     # the tools called, in order (`{name, arguments}` to check
                                    # the arguments too); [] for none
              rubric: The reply gives the sum as a number.
"""

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class EvalSetError(ValueError):
    """The file is not an eval set; the message names where."""


class ExpectedToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict | None = None


class Expect(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reply_exact: str | None = None
    reply_contains: list[str] | None = None
    tool_calls: list[ExpectedToolCall] | None = None
    rubric: str | None = None

    @field_validator("reply_contains", mode="before")
    @classmethod
    def _one_or_many(cls, value):
        return [value] if isinstance(value, str) else value

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _names_or_calls(cls, value):
        return [{"name": call} if isinstance(call, str) else call for call in value or []] \
            if value is not None else None


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str = Field(min_length=1)
    expect: Expect = Field(default_factory=Expect)


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    turns: list[Turn] = Field(min_length=1)


class EvalSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    judge_model: str | None = None
    cases: list[Case] = Field(min_length=1)

    @property
    def needs_judge(self) -> bool:
        return any(turn.expect.rubric for case in self.cases for turn in case.turns)


def parse(text: str) -> EvalSet:
    """The eval set of a YAML text; EvalSetError naming the first field at fault."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise EvalSetError(f"not YAML: {exc}") from None
    try:
        return EvalSet.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the file"
        raise EvalSetError(f"{where}: {error['msg']}") from None


def load(path: Path) -> EvalSet:
    try:
        return parse(Path(path).read_text())
    except OSError as exc:
        raise EvalSetError(f"cannot read {path}: {exc.strerror}") from None
