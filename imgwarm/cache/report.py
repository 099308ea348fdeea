"""What a warm run did: one report a tier (copied, evicted, held, what failed) and one for the
run (sources, logs, RAM's hit share), as JSON for ``warm --json`` and as one line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from imgwarm.reporting import mib as _mib


@dataclass
class TierReport:
    copied: int = 0
    copied_bytes: int = 0
    evicted: int = 0
    evicted_bytes: int = 0
    held: int = 0  # after the run
    held_bytes: int = 0
    budget: int | None = None
    repaired: int = 0  # --full: missing or damaged files copied again, strays removed
    foreign: int = 0  # --full: files in the tier this index never wrote: left where they are
    missing: int = 0  # not in the origin: not placed
    failed: int = 0  # could not be read or written (an I/O error): not placed, tried again
    errors: str | None = None  # the first such error
    stopped: str | None = None  # why placement in this tier stopped (a full disk)
    reset: bool = False  # found empty (a reboot, a new disk): filled again

    def line(self, name: str) -> str:
        text = (f"{name} +{self.copied} ({_mib(self.copied_bytes)}) -{self.evicted} "
                f"({_mib(self.evicted_bytes)}), holds {self.held} ({_mib(self.held_bytes)})")
        text += f", {self.failed} failed ({self.errors})" if self.failed else ""
        text += f", {self.foreign} foreign file(s) left" if self.foreign else ""
        return text + (f" STOPPED: {self.stopped}" if self.stopped else "")


@dataclass
class WarmReport:
    ram: TierReport = field(default_factory=TierReport)
    nvme: TierReport = field(default_factory=TierReport)
    sources: int = 0  # sources whose records were read
    variants_added: int = 0
    variants_dropped: int = 0
    log_files: int = 0
    log_lines: int = 0
    requests: int = 0  # successful GETs and HEADs read
    requests_to_variants: int = 0  # of those, to a variant imgwarm knows
    malformed_lines: int = 0
    unsafe_paths: int = 0  # with .., odd bytes or outside the image prefix: never followed
    damaged_records: int = 0  # manifest records that could not be read: skipped, kept as were
    ram_hit_share: float | None = None  # of the decayed requests, what RAM now answers
    dry_run: bool = False
    full: bool = False
    seconds: float = 0.0
    steps: dict[str, float] = field(default_factory=dict)  # each step's seconds, in order

    def tiers(self) -> dict[str, TierReport]:
        """The tiers' reports by name, in the order nginx tries the tiers."""
        return {name: value for name, value in vars(self).items()
                if isinstance(value, TierReport)}

    def to_object(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            name: value for name, value in vars(self).items()
            if not isinstance(value, TierReport)}
        found |= {name: vars(report) for name, report in self.tiers().items()}
        return found

    def line(self) -> str:
        """One line for a log or a terminal."""
        share = "-" if self.ram_hit_share is None else f"{self.ram_hit_share:.1%}"
        tiers = "; ".join(report.line(name) for name, report in self.tiers().items())
        return (f"{'would ' if self.dry_run else ''}warm: {tiers}; "
                f"RAM answers {share} of requests; "
                f"{self.sources} source(s) read, {self.log_lines:,} log line(s) "
                f"({self.malformed_lines:,} malformed, {self.unsafe_paths:,} unsafe paths); "
                + (f"{self.damaged_records:,} damaged record(s) skipped; "
                   if self.damaged_records else "") + f"{self.seconds:.1f} s")


