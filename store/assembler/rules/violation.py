"""A broken provider rule: which rule, where in the payload, and why."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Violation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: str  # e.g. "O2", "A4"
    where: str  # a path into the payload, e.g. "messages[3]"
    message: str

    def __str__(self) -> str:
        return f"{self.rule} at {self.where}: {self.message}"


class Violations(list[Violation]):
    """What one check found, in payload order; `flag` records one more."""

    def flag(self, rule: str, where: str, message: str) -> None:
        self.append(Violation(rule=rule, where=where, message=message))
