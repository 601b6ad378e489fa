"""Typed views of the API's answers: jobs, with times as datetimes and durations in seconds."""

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

TERMINAL_STATES = ("succeeded", "failed", "cancelled")


def parse_time(text: Optional[str]) -> Optional[datetime]:
    """The API's "2026-11-26T14:20:00Z" as an aware datetime; None for ""."""
    if not text:
        return None
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


@dataclass
class Job:
    """One job as GET /v1/jobs/{id} answers it (lists leave out command, env, working_dir)."""

    id: str
    name: str = ""
    user: str = ""
    team: str = ""
    project: str = ""
    priority: str = ""
    state: str = ""
    submitted_at: Optional[datetime] = None
    started_at: Optional[datetime] = None
    ended_at: Optional[datetime] = None
    runs: int = 0
    evictions: int = 0
    exit_code: Optional[int] = None
    reason: str = ""
    held: str = ""
    spec: Dict[str, Any] = field(default_factory=dict)
    placement: List[Dict[str, Any]] = field(default_factory=list)
    cost: Optional[float] = None
    currency: str = ""
    array_job_id: str = ""
    array_task_id: Optional[int] = None
    array: Optional[Dict[str, Any]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, j: Dict[str, Any]) -> "Job":
        return cls(
            id=j.get("id", ""),
            name=j.get("name", ""),
            user=j.get("user", ""),
            team=j.get("team", ""),
            project=j.get("project", ""),
            priority=j.get("priority", ""),
            state=j.get("state", ""),
            submitted_at=parse_time(j.get("submitted_at")),
            started_at=parse_time(j.get("started_at")),
            ended_at=parse_time(j.get("ended_at")),
            runs=j.get("runs", 0),
            evictions=j.get("evictions", 0),
            exit_code=j.get("exit_code"),
            reason=j.get("reason", ""),
            held=j.get("held", ""),
            spec=j.get("spec", {}),
            placement=j.get("placement", []),
            cost=j.get("cost"),
            currency=j.get("currency", ""),
            array_job_id=j.get("array_job_id", ""),
            array_task_id=j.get("array_task_id"),
            array=j.get("array"),
            raw=j,
        )

    @property
    def done(self) -> bool:
        """Whether the job has ended (succeeded, failed or cancelled)."""
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self) -> bool:
        return self.state == "succeeded"
