"""Typed, validated run settings: one frozen dataclass per paper, one instance per profile (smoke / cpu / gpu).

`ProfileConfig` is the base: every field carries the check its value must pass, so a bad value raises a ValueError
that names the field (`lr must be a positive number; got -1`), and `for_profile(profile, **given)` gives a profile's
config with the given values put over it (None: keep the profile's, as a notebook's parameters cell means it).
`TrainConfig` adds the LoRA SFT hyper-parameters both papers train with, including how a batch is split into
micro-batches (gradient accumulation) and whether activations are recomputed (gradient checkpointing).
The papers' configs: `retllm.config.RetLLMConfig` (notebooks 01–03), `memllm.config.MemLLMConfig` (04–07).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping

from .paths import PROFILES as PROFILE_NAMES
from .paths import check_profile

__all__ = [
    "Check",
    "checked",
    "optional",
    "one_of",
    "POSITIVE_INT",
    "COUNT",
    "POSITIVE",
    "NON_NEGATIVE",
    "SHARE",
    "SHARE_BELOW_1",
    "BOOL",
    "TEXT",
    "ProfileConfig",
    "TrainConfig",
]


@dataclass(frozen=True)
class Check:
    """What a field's value must be, in words for the error message, and the test of it."""

    what: str
    test: Callable[[Any], bool]

    def __call__(self, value: Any) -> bool:
        return self.test(value)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


POSITIVE_INT = Check("a positive int", lambda v: _int(v) and v > 0)
COUNT = Check("an int >= 0", lambda v: _int(v) and v >= 0)
POSITIVE = Check("a positive number", lambda v: _number(v) and v > 0)
NON_NEGATIVE = Check("a number >= 0", lambda v: _number(v) and v >= 0)
SHARE = Check("a share in [0, 1]", lambda v: _number(v) and 0 <= v <= 1)
SHARE_BELOW_1 = Check("a share in [0, 1)", lambda v: _number(v) and 0 <= v < 1)
BOOL = Check("True or False", lambda v: isinstance(v, bool))
TEXT = Check("a non-empty string", lambda v: isinstance(v, str) and bool(v))


def optional(check: Check, none_means: str) -> Check:
    """`check`, or None (which means `none_means`, e.g. "all of them")."""
    return Check(f"{check.what} or None ({none_means})", lambda v: v is None or check(v))


def one_of(*values: Any) -> Check:
    return Check("one of " + ", ".join(map(repr, values)), lambda v: v in values)


def checked(check: Check, default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field whose value `ProfileConfig` checks with `check` (no default: every profile sets it)."""
    return field(default=default, metadata={"check": check})


@dataclass(frozen=True, kw_only=True)
class ProfileConfig:
    """A profile's settings, checked field by field when made (and when `replace`d).

    Subclasses list their fields with `checked(...)`, keep their profiles in `PROFILES`, and may add checks between
    fields in `_check_fields`. Sequences are stored as tuples (a frozen config holds no list that could change).
    """

    PROFILES: ClassVar[Mapping[str, ProfileConfig]] = {}

    profile: str = checked(one_of(*PROFILE_NAMES))
    seed: int = checked(COUNT, 0)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, list):
                value = tuple(value)
                object.__setattr__(self, f.name, value)
            check = f.metadata.get("check")
            if check is not None and not check(value):
                raise ValueError(f"{f.name} must be {check.what}; got {value!r} ({type(self).__name__})")
        self._check_fields()

    def _check_fields(self) -> None:
        """Checks that involve several fields (none here)."""

    @classmethod
    def for_profile(cls, profile: str, **given: Any):
        """The profile's config with every `given` value that is not None put over it.

        An unknown profile raises ValueError naming the valid ones; an unknown setting TypeError naming it.
        """
        base = cls.PROFILES[check_profile(profile)]
        names = {f.name for f in dataclasses.fields(cls)} - {"profile"}
        unknown = sorted(set(given) - names)
        if unknown:
            raise TypeError(f"{cls.__name__} has no setting {', '.join(map(repr, unknown))}")
        return dataclasses.replace(base, **{k: v for k, v in given.items() if v is not None})

    def replace(self, **values: Any):
        """A copy with `values` set, None included (`for_profile` skips None; here None is a value)."""
        return dataclasses.replace(self, **values)

    def as_dict(self, names: tuple[str, ...] | None = None) -> dict[str, Any]:
        """JSON-ready settings (tuples as lists): every field, or only `names`."""
        fields = names or tuple(f.name for f in dataclasses.fields(self))
        return {k: list(v) if isinstance(v, tuple) else v for k in fields for v in (getattr(self, k),)}


@dataclass(frozen=True, kw_only=True)
class TrainConfig(ProfileConfig):
    """LoRA SFT hyper-parameters (`training.sft_config`, `lora_config`, `train_or_reuse`).

    `batch_size` is the batch of one optimizer step, over every device: the paper's. `micro_batch` is how many
    examples one device runs through the model at once (None: the whole share of the batch); the rest is gradient
    accumulation, so a large batch of long examples fits in memory without changing what is learnt.
    `gradient_checkpointing` recomputes activations in the backward pass instead of keeping them (less memory,
    about a third more compute).
    """

    lr: float = checked(POSITIVE)
    epochs: float = checked(POSITIVE)
    batch_size: int = checked(POSITIVE_INT)
    micro_batch: int | None = checked(optional(POSITIVE_INT, "the whole batch at once"), None)
    gradient_checkpointing: bool = checked(BOOL, False)
    max_length: int = checked(POSITIVE_INT)  # tokens; an example whose supervised part it would cut raises
    max_steps: int | None = checked(optional(POSITIVE_INT, "every step of the epochs"), None)
    lora_r: int = checked(POSITIVE_INT)  # LoRA rank, on every linear projection
    lora_alpha: int = checked(POSITIVE_INT)  # the update is scaled by lora_alpha / lora_r
    lora_dropout: float = checked(SHARE_BELOW_1)

    def _check_fields(self) -> None:
        super()._check_fields()
        if self.micro_batch is not None and self.batch_size % self.micro_batch:
            raise ValueError(
                f"micro_batch must divide batch_size (the rest is gradient accumulation); "
                f"got micro_batch {self.micro_batch}, batch_size {self.batch_size} ({type(self).__name__})"
            )

    def batch_split(self, processes: int = 1) -> tuple[int, int]:
        """(examples per device and forward pass, accumulation steps) that make `batch_size` over `processes`."""
        if self.batch_size % processes:
            raise ValueError(f"batch_size {self.batch_size} does not split over {processes} processes")
        share = self.batch_size // processes
        micro = min(self.micro_batch or share, share)
        if share % micro:
            raise ValueError(
                f"micro_batch {micro} does not divide the {share} examples each of {processes} processes takes a step"
            )
        return micro, share // micro
