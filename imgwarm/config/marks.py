"""Marks on settings fields: what a setting's value changes, said once, where it is declared.

The manifest store's digests are derived from them: a manifest is reused only while every
setting that changes output bytes or names is the same, and a refusal is given again without
decoding only while those and every setting that decides a refusal are the same.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

Affects = Literal["output", "refusal"]
OUTPUT: dict[str, Any] = {"affects": "output"}  # changes the bytes or names of variants
REFUSAL: dict[str, Any] = {"affects": "refusal"}  # changes which sources are refused
# changes outputs only while the group's method of that name says so (a setting added later,
# that must leave the digests of manifests made before it as they were)
OUTPUT_IF_AUTO: dict[str, Any] = {"affects": "output", "only_if": "auto_quality"}
OUTPUT_IF_LADDER: dict[str, Any] = {"affects": "output", "only_if": "byte_ladder"}
OUTPUT_IF_PREDICTED: dict[str, Any] = {"affects": "output", "only_if": "predicts_quality"}
OUTPUT_IF_JXL: dict[str, Any] = {"affects": "output", "only_if": "makes_jxl"}
OUTPUT_IF_FALLBACK: dict[str, Any] = {"affects": "output", "only_if": "thins_fallback"}


def marked(group: BaseModel, *kinds: Affects) -> dict[str, Any]:
    """The values of a group's fields that carry one of these marks, by name."""
    found = {}
    for name, info in type(group).model_fields.items():
        extra = info.json_schema_extra
        if isinstance(extra, dict) and extra.get("affects") in kinds:
            condition = extra.get("only_if")
            if condition is None or getattr(group, str(condition))():
                found[name] = getattr(group, name)
    return found


def split_csv(value: Any) -> Any:
    """Accept "320,640" (environment, option) as well as real lists (TOML, Python)."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value
