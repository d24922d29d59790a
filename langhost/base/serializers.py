"""Serializer helpers shared by the apps' APIs."""

from rest_framework import serializers


class RequestSerializer(serializers.Serializer):
    """A serializer for a request body, its declared fields copied rather than deep-copied.

    DRF deep-copies every declared field for each serializer it makes, so that binding a field
    to its serializer never touches the class's own. On the endpoints that start runs that
    cost more than validating the body. Binding only sets attributes of the field itself, so
    a shallow copy is enough for plain fields and for nested serializers made this way too
    (a field whose own state changes while it validates must not be declared on one).
    """

    def get_fields(self):
        return {name: _clone(field) for name, field in self._declared_fields.items()}


def _clone(field):
    # What `copy.copy` makes of a field, without its trip through `__reduce_ex__`.
    clone = object.__new__(type(field))
    clone.__dict__.update(field.__dict__)
    return clone
