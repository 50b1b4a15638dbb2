"""Maintained by the mrtr-server template: what a deploy would do to a stack's resources, read
from the two templates before anything is written, for the confirmation to show.

A change set would say it too, with per-property replacement, but creating one is a write (for a
new stack it even creates the stack, in REVIEW_IN_PROGRESS), and the user has not said yes yet.
Reading the templates says, for sure, what is added, deleted, and replaced by a change of type;
for a resource whose properties change it can only say "changed": CloudFormation decides per
property whether that is an update in place or a replacement, and the confirmation says so.

Templates are YAML or JSON (JSON is YAML). PyYAML reads them (the project's `aws` extra), with
CloudFormation's short-form intrinsics (`!Ref`, `!Sub`, ...) read as their long form so that two
templates compare as CloudFormation would see them; aliases are refused, as CloudFormation
refuses them, which also keeps a hostile template from expanding into a huge comparison.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..mrtr_runtime import ToolError

__all__ = ("ResourceChanges", "Template", "resource_changes", "template_resources")

#: A template's resources: logical ID -> its whole declaration (Type, Properties, policies...).
Template = Mapping[str, Mapping[str, Any]]
#: One resource as the confirmation names it: (logical ID, resource type).
Named = tuple[str, str]

#: CloudFormation's short forms whose long form is not "Fn::" + the tag.
_LONG_FORM: Final = {"Ref": "Ref", "Condition": "Condition"}


@dataclass(frozen=True)
class ResourceChanges:
    """How a deploy changes a stack's resources, each list sorted by logical ID."""

    added: tuple[Named, ...] = ()
    deleted: tuple[Named, ...] = ()
    #: The same logical ID with another type: CloudFormation deletes the old resource.
    replaced: tuple[tuple[str, str, str], ...] = ()  # (logical ID, old type, new type)
    #: The same logical ID and type, declared differently: updated in place, or replaced
    #: where CloudFormation's rules for the changed property say so.
    changed: tuple[Named, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.added or self.deleted or self.replaced or self.changed)


def _yaml() -> Any:
    try:
        return importlib.import_module("yaml")
    except ImportError:
        raise ToolError(
            "deploy_to_aws needs PyYAML to read templates, which is not installed: "
            "install the project's `aws` extra"
        ) from None


@functools.cache
def _template_loader() -> Any:
    yaml = _yaml()

    class TemplateLoader(yaml.SafeLoader):  # type: ignore[misc,name-defined]
        """SafeLoader with CloudFormation's tags, and no aliases."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.constructor.ConstructorError(
                    None, None, "CloudFormation templates cannot use YAML aliases", mark
                )
            return super().compose_node(parent, index)

    def intrinsic(loader: Any, suffix: str, node: Any) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if suffix == "GetAtt":  # !GetAtt Queue.Arn is ["Queue", "Arn"] in long form
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {_LONG_FORM.get(suffix, f"Fn::{suffix}"): value}

    TemplateLoader.add_multi_constructor("!", intrinsic)
    return TemplateLoader


def template_resources(template: str | Mapping[str, Any]) -> Template:
    """The `Resources` of a template: its text, or the parsed document botocore hands back
    for a JSON template (GetTemplate). Raises ToolError if it cannot be read."""
    document: Any = template
    if isinstance(template, str):
        yaml = _yaml()
        try:
            document = yaml.load(template, Loader=_template_loader())
        except yaml.YAMLError as error:
            raise ToolError(f"The template cannot be read as YAML or JSON: {error}") from None
    resources = document.get("Resources") if isinstance(document, Mapping) else None
    if not isinstance(resources, Mapping) or not all(
        isinstance(key, str) and isinstance(value, Mapping) for key, value in resources.items()
    ):
        raise ToolError("The template has no `Resources` mapping of logical IDs to resources.")
    return resources


def _type(resource: Mapping[str, Any]) -> str:
    return str(resource.get("Type", "?"))


def resource_changes(before: Template | None, after: Template) -> ResourceChanges:
    """What deploying `after` over a stack made from `before` does (`None`: no stack yet)."""
    before = before or {}
    both = sorted(set(before) & set(after))
    return ResourceChanges(
        added=tuple((key, _type(after[key])) for key in sorted(set(after) - set(before))),
        deleted=tuple((key, _type(before[key])) for key in sorted(set(before) - set(after))),
        replaced=tuple(
            (key, _type(before[key]), _type(after[key]))
            for key in both
            if _type(before[key]) != _type(after[key])
        ),
        changed=tuple(
            (key, _type(after[key]))
            for key in both
            if _type(before[key]) == _type(after[key]) and before[key] != after[key]
        ),
    )
