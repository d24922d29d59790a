import django_filters
from rest_framework import viewsets

from runners.api.serializers.plugin_tools import ToolSerializer
from runners.models import ToolDescriptor


class ToolFilter(django_filters.FilterSet):
    plugin = django_filters.CharFilter(method="filter_plugin",
                                       help_text="`author/name` of the plugin")

    class Meta:
        model = ToolDescriptor
        fields = ["available", "plugin_author", "plugin_name"]

    def filter_plugin(self, queryset, name, value):
        author, _, plugin = value.partition("/")
        return queryset.filter(plugin_author=author, plugin_name=plugin)


class ToolViewSet(viewsets.ReadOnlyModelViewSet):
    """Plugin tools (`Tool` components) from the runtime's discovery; unavailable ones are kept."""

    serializer_class = ToolSerializer
    queryset = ToolDescriptor.objects.order_by("id")
    lookup_value_regex = r".+"
    filterset_class = ToolFilter
