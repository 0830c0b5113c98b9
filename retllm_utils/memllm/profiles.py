"""The profiles of `memllm.config` as plain dicts: the interface notebooks 06 and 07 still read."""

# TO REMOVE once notebooks 06 and 07 read `MemLLMConfig.for_profile` (the source of truth) directly.
from __future__ import annotations

from .config import MemLLMConfig

__all__ = ["PROFILES", "settings"]

PROFILES = {p: c.as_dict() for p, c in MemLLMConfig.PROFILES.items()}


def settings(profile: str, **given: object) -> dict:
    """`MemLLMConfig.for_profile(profile, **given)` as a dict (sequences as lists)."""
    return MemLLMConfig.for_profile(profile, **given).as_dict()
