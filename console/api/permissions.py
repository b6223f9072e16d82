"""The API's authorization: each viewset names the permission of every action (an action it does not
name is refused), and its rows are those of the projects the user may see (console/access/policy.py)."""

from rest_framework.permissions import BasePermission

from console.access.policy import scoped


class ActionPermission(BasePermission):
    """The permission `view.action_permissions[view.action]`, e.g. {"start": "console.run_project"}."""

    def has_permission(self, request, view) -> bool:
        if view.action in (None, "metadata"):  # not routed (a 405 follows), or OPTIONS
            return True
        needed = view.action_permissions.get(view.action)
        if needed is None:
            self.message = f"No permission is declared for {view.action!r}."
            return False
        if not request.user.has_perm(needed):
            self.message = f"This needs the {needed} permission."
            return False
        return True


def read_write(model: str, app: str = "crawl") -> dict[str, str]:
    """The CRUD actions of a model viewset and the model permissions they need."""
    return {
        "list": f"{app}.view_{model}",
        "retrieve": f"{app}.view_{model}",
        "create": f"{app}.add_{model}",
        "update": f"{app}.change_{model}",
        "partial_update": f"{app}.change_{model}",
        "destroy": f"{app}.delete_{model}",
    }


def read_only(model: str, app: str = "crawl") -> dict[str, str]:
    return {"list": f"{app}.view_{model}", "retrieve": f"{app}.view_{model}"}


class ProjectScopedMixin:
    """A viewset whose rows are those of the projects the user may see; `project_path` leads from
    its model to the project."""

    project_path = "project"
    action_permissions: dict[str, str] = {}

    def get_permissions(self):
        return [*super().get_permissions(), ActionPermission()]

    def get_queryset(self):
        queryset = super().get_queryset()
        if getattr(self, "swagger_fake_view", False):  # the OpenAPI schema is being built
            return queryset
        return scoped(queryset, getattr(self.request, "user", None), self.project_path)
