"""What a monitor's check answers for a subject whose condition holds (console/health/checks.py)."""

from dataclasses import dataclass, field


@dataclass
class Finding:
    message: str
    evidence: dict = field(default_factory=dict)


def minutes_text(minutes) -> str:
    return f"{float(minutes):g} minute{'' if float(minutes) == 1 else 's'}"
