"""The harness / bare ratio of rounds alternated in one stage (harness, bare, harness, bare,
...), with its spread: the rule, written once (tests/unit/test_gpu_check_ratio.py).

Round i's ratio is the harness's samples/s of round i over the bare loop's of round i (the two
ran one after the other, so a slow minute of the machine weighs on both). The figure is the
median of the rounds' ratios, its spread their min..max. A spread that includes 1.0 says the
difference is within the noise of these rounds; one wholly below 1.0 says the harness costs
something, one wholly above that the bare loop was the slower. Standard library only.
"""
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    ratios: tuple          # harness / bare, round by round
    median: float
    low: float
    high: float

    @property
    def rounds(self) -> int:
        return len(self.ratios)

    @property
    def within_noise(self) -> bool:
        """Whether the rounds' spread includes 1.0: no cost told apart from noise."""
        return self.low <= 1.0 <= self.high

    def verdict(self) -> str:
        """One line: the ratio, its spread, and what the spread says."""
        text = f"harness / bare {self.median:.2f} ({self.low:.2f}-{self.high:.2f} over {self.rounds} rounds)"
        if self.within_noise:
            return text + ": within noise (the spread includes 1.0)"
        if self.high < 1.0:
            return text + f": the harness costs {1 - self.high:.0%}-{1 - self.low:.0%}"
        return text + ": the harness was the faster in every round"


def spread(harness, bare) -> Spread:
    """The Spread of rounds' rates (samples/s), harness[i] and bare[i] of round i. Rounds
    where either side has no rate (None) are left out; ValueError when none is left."""
    if len(harness) != len(bare):
        raise ValueError(f"{len(harness)} harness rounds against {len(bare)} bare rounds")
    ratios = tuple(h / b for h, b in zip(harness, bare) if h and b)
    if not ratios:
        raise ValueError("no round with both a harness and a bare rate")
    return Spread(ratios, statistics.median(ratios), min(ratios), max(ratios))
