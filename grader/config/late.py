"""`[late]` in assignment.toml: the course's late policy, and its arithmetic.

    [late]
    due = "2026-12-10T23:59:00-05:00"   # ISO 8601 with the time zone's offset (or a TOML offset date-time)
    grace_minutes = 15                  # submissions up to this long after `due` are on time (default 0)
    penalty_per_day = 0.1               # a fraction of the assignment's points per started day late, after the grace
    max_penalty = 0.5                   # the most the policy takes, as a fraction (default 1: everything)

Without the table there is no policy. A day is charged for every started 24 hours after due + grace: a second after
the grace is one day, exactly 24 hours after it still one, a second more two. The policy is applied as the results
are written (grader/lms/late.py, grader/outputs/adjustments.py), never while grading: it is left out of the
assignment's fingerprint, so changing it re-grades nobody.

Every time the arithmetic meets (the due date here, each submission time in grader/lms/late.py) lies a day inside the
range a datetime holds in UTC (`in_range`), and the grace is at most MAX_GRACE_MINUTES, so no subtraction, no
conversion to another offset and no timedelta can overflow: a time outside is refused where it is read, naming it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from grader.config.table_rules import is_number, unknown_keys

TABLE = "late"
TARGET = "late"        # `grader adjust STUDENT late ...`: the late penalty, so no check may be named so
KEYS = ("due", "grace_minutes", "penalty_per_day", "max_penalty")
EXAMPLE = '"2026-12-10T23:59:00-05:00"'
DAY = datetime.timedelta(days=1)
MAX_GRACE_MINUTES = 366 * 24 * 60    # a year's grace: more is no late policy, and far below what a timedelta holds
EARLIEST = datetime.datetime.min.replace(tzinfo=datetime.UTC) + DAY   # a day inside datetime's range, so a time
LATEST = datetime.datetime.max.replace(tzinfo=datetime.UTC) - DAY     # shown in any offset (< 24 h) is one too
RANGE = f"{EARLIEST.date().isoformat()} to {LATEST.date().isoformat()} in UTC"


@dataclass(frozen=True)
class LatePolicy:
    due: datetime.datetime            # aware: one instant
    grace_minutes: float = 0.0
    penalty_per_day: float = 0.0      # fraction of the points per started day
    max_penalty: float = 1.0          # fraction

    def days_charged(self, submitted_at: datetime.datetime) -> int:
        """Started days after due + grace (0 up to and at the end of the grace)."""
        over = submitted_at - self.due - datetime.timedelta(minutes=self.grace_minutes)
        if over <= datetime.timedelta(0):
            return 0
        microsecond = datetime.timedelta(microseconds=1)
        return -(-(over // microsecond) // (DAY // microsecond))     # ceiling, in whole microseconds

    def fraction(self, days: int) -> float:
        """The share of the points `days` charged days take, at most `max_penalty`."""
        return min(self.max_penalty, days * self.penalty_per_day)


def parse_time(value: Any) -> datetime.datetime | None:
    """An aware date-time from a TOML date-time or an ISO 8601 text with an offset (`Z` allowed); None otherwise."""
    if isinstance(value, str):
        text = value.strip()
        try:
            value = datetime.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            return None
    if isinstance(value, datetime.datetime) and value.tzinfo is not None and value.utcoffset() is not None:
        return value
    return None


def in_range(at: datetime.datetime) -> bool:
    """Whether an aware time is one the late arithmetic can compute with (comparing never overflows; converting a
    time past datetime's last UTC instant does)."""
    return EARLIEST <= at <= LATEST


def late_problems(config: dict[str, Any]) -> list[str]:
    """Problems of `[late]` (none when the table is absent)."""
    table = config.get(TABLE)
    problems = [f"[[checks]] id = {TARGET!r}: the name is reserved for the late penalty (`grader adjust STUDENT "
                f"{TARGET} ...`); rename the check" for check in config.get("checks", [])
                if isinstance(check, dict) and check.get("id") == TARGET]
    if table is None:
        return problems
    if not isinstance(table, dict):
        return problems + ["late must be a table [late] (due, grace_minutes, penalty_per_day, max_penalty)"]
    problems += unknown_keys(table, KEYS, "[late]")
    due = parse_time(table.get("due"))
    if "due" not in table:
        problems.append(f"[late] due is missing: add due = {EXAMPLE} (ISO 8601, with the time zone's offset)")
    elif due is None:
        why = ("has no time zone offset, so it names no single instant"
               if _local_time(table["due"]) else "is not an ISO 8601 date and time")
        problems.append(f"[late] due = {str(table['due'])!r} {why}: write it with its offset, e.g. due = {EXAMPLE} "
                        '(or "...Z" for UTC)')
    elif not in_range(due):
        problems.append(f"[late] due = {str(table['due'])!r} is outside the times the grader can compute with "
                        f"({RANGE}): write the real due date, e.g. due = {EXAMPLE}")
    grace = table.get("grace_minutes", 0)
    if not (is_number(grace) and 0 <= grace <= MAX_GRACE_MINUTES):   # NaN and infinities fail the comparison
        problems.append(f"[late] grace_minutes = {grace!r}: must be a number of minutes >= 0 and at most "
                        f"{MAX_GRACE_MINUTES} (366 days), e.g. grace_minutes = 15")
    for key, example in (("penalty_per_day", "0.1 (10% of the points a day)"), ("max_penalty", "0.5 (at most half)")):
        value = table.get(key, 0)
        if not (is_number(value) and 0 <= value <= 1):
            problems.append(f"[late] {key} = {value!r}: must be a fraction of the assignment's points from 0 to 1, "
                            f"e.g. {key} = {example}")
    return problems


def _local_time(value: Any) -> bool:
    if isinstance(value, datetime.datetime):
        return value.tzinfo is None
    try:
        return datetime.datetime.fromisoformat(str(value).strip()).tzinfo is None
    except ValueError:
        return False


def late_policy(config: dict[str, Any]) -> LatePolicy | None:
    """The policy of a validated config, or None when it has no [late] table."""
    table = config.get(TABLE)
    if not isinstance(table, dict):
        return None
    due = parse_time(table.get("due"))
    if due is None:
        return None
    return LatePolicy(due=due, grace_minutes=float(table.get("grace_minutes", 0)),
                      penalty_per_day=float(table.get("penalty_per_day", 0)),
                      max_penalty=float(table.get("max_penalty", 1)))
