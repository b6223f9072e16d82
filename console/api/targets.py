"""Where alerts and job ends are told, over the API (/api/notification-targets/): admins only
(users who see every project and may change network settings), as in the admin, since messages go
from the workers to these addresses directly. A target's URL is answered with its credentials
masked (console/masking.py), and a masked URL sent back keeps the stored one."""

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, viewsets
from rest_framework.permissions import BasePermission, IsAuthenticated

from console.access.policy import sees_all
from console.health.models import NotificationTarget

from . import serializers as s
from .fields import SecretURLField
from .permissions import ActionPermission, read_write


class AdminsOnly(BasePermission):
    message = "Notification targets are for users who see every project and may change network settings."

    def has_permission(self, request, view) -> bool:
        user = request.user
        return bool(sees_all(user) and user.has_perm("console.change_network_settings"))


class NotificationTargetSerializer(s.KnownFieldsOnly, serializers.ModelSerializer):
    project = s.ProjectSlugField(
        required=False, allow_null=True, help_text="Slug of its project; null: every project's messages."
    )
    url = SecretURLField(help_text=NotificationTarget._meta.get_field("url").help_text)

    class Meta:
        model = NotificationTarget
        fields = ("id", "project", "name", "url", "enabled", "quiet_from", "quiet_until", "quiet_timezone")

    def validate(self, attrs: dict) -> dict:
        """The model's own checks (an Apprise URL this server can use, whole quiet hours)."""
        current = {f: getattr(self.instance, f) for f in self.Meta.fields[1:]} if self.instance else {}
        try:
            NotificationTarget(**(current | attrs)).clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return attrs


@extend_schema_view(list=extend_schema(summary="List notification targets (admins only)"))
class NotificationTargetViewSet(viewsets.ModelViewSet):
    queryset = NotificationTarget.objects.select_related("project").order_by("id")
    serializer_class = NotificationTargetSerializer
    permission_classes = [IsAuthenticated, AdminsOnly, ActionPermission]
    action_permissions = read_write("notificationtarget", app="console")
    lookup_value_regex = s.ID_PATTERN
