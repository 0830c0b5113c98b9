"""The profiles of `retllm.config` as plain dicts: the interface notebook 03 and `matching` still read."""

# TO REMOVE once notebook 03 and retllm/matching.py read `RetLLMConfig.for_profile` (the source of truth) directly.
from __future__ import annotations

from .config import RetLLMConfig

__all__ = ["PROFILES", "settings"]

PROFILES = {p: c.as_dict() for p, c in RetLLMConfig.PROFILES.items()}


def settings(profile: str, **given: object) -> dict:
    """`RetLLMConfig.for_profile(profile, **given)` as a dict (sequences as lists)."""
    return RetLLMConfig.for_profile(profile, **given).as_dict()
