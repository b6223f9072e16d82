"""Serializer fields and validators that refuse, with a reason, what the database or the crawler cannot take."""

import re

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from console.masking import masked_config, masked_map, masked_url, unmasked_config, unmasked_map, unmasked_url
from crawl.validators import json_problem
from scrape.jsonapi import ApiConfigError, compile_api_config

# RFC 9110 token: the characters a header (or cookie) name may use.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,200}")


@extend_schema_field({"type": "object", "additionalProperties": True})
class JSONObjectField(serializers.JSONField):
    """A JSON object (not a list, string or number) that PostgreSQL's jsonb accepts."""

    default_error_messages = {"not_object": "Expected a JSON object.", "unstorable": "{reason}."}

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            self.fail("not_object")
        if problem := json_problem(value):
            self.fail("unstorable", reason=problem)
        return value


@extend_schema_field(
    {
        "type": "object",
        "description": "Names are header tokens (letters, digits and !#$%&'*+-.^_`|~).",
        "additionalProperties": {"type": "string", "maxLength": 8000, "pattern": "^[^\\r\\n]*$"},
    }
)
class HeaderMapField(serializers.DictField):
    """Header (or cookie) names to values: names are tokens, values carry no line breaks or NUL."""

    default_error_messages = {"bad_name": "Not a valid name: {name!r}."}

    def __init__(self, **kwargs):
        value = serializers.CharField(
            allow_blank=True, max_length=8000, trim_whitespace=False, validators=[_no_line_breaks]
        )
        super().__init__(child=value, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        bad = next((name for name in value if not _TOKEN.fullmatch(name)), None)
        if bad is not None:
            self.fail("bad_name", name=bad[:200])
        return value


class SecretMapField(HeaderMapField):
    """Header or cookie values are write-only: they are answered with the mask, and a value sent back
    as the mask keeps the stored one (a GET, edited and PUT back, changes nothing)."""

    def to_representation(self, value):
        return masked_map(value)

    def to_internal_value(self, data):
        return unmasked_map(super().to_internal_value(data), _stored(self))


class SecretURLField(serializers.CharField):
    """A URL whose credentials (user:password@) are write-only, like SecretMapField's values."""

    def to_representation(self, value):
        return masked_url(str(value or ""))

    def to_internal_value(self, data):
        return unmasked_url(super().to_internal_value(data), _stored(self) or "")


@extend_schema_field({"type": "object", "additionalProperties": True})
class SinkConfigField(serializers.JSONField):
    """A sink's config, whose "url" (a redis or http sink's) has write-only credentials, and whose
    "secret" (an http sink's) is write-only."""

    def to_representation(self, value):
        return masked_config(super().to_representation(value))

    def to_internal_value(self, data):
        return unmasked_config(super().to_internal_value(data), _stored(self))


def _stored(field: serializers.Field):
    """The field's value on the instance being updated (None when creating)."""
    instance = getattr(field.parent, "instance", None)
    return getattr(instance, field.source, None) if instance is not None else None


def _no_line_breaks(value: str) -> None:
    if any(ch in value for ch in "\r\n"):
        raise serializers.ValidationError("Values may not contain line breaks.")


_PATH = {"type": "string", "minLength": 1, "description": "A dotted path, like data.items.0."}


@extend_schema_field(
    {
        "type": "object",
        "description": "JSON API mode (see scrape/jsonapi.py); empty for HTML crawls.",
        "properties": {
            "records": _PATH,
            "fields": {"type": "object", "additionalProperties": _PATH},
            "schema": {"type": "object", "description": "A JSON Schema each record is validated with."},
            "next": {"type": "object", "description": 'Pagination: {"link": path} or {"param": name, ...}.'},
        },
        "additionalProperties": False,
    }
)
class ApiConfigField(JSONObjectField):
    """The project's JSON API configuration, checked by the extractor's own compiler."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value:
            try:
                compile_api_config(value)
            except ApiConfigError as exc:
                raise serializers.ValidationError(str(exc)) from None
        return value
