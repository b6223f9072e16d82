"""What every admin of project rows shares: only the rows of the projects the user may see, project
choices and filters limited to those, and the permissions the actions declare (`run`, `export`)."""

from django.contrib import admin

from console.access.policy import groups_for, may, projects_for, scoped, sees_all, users_for
from console.models import ProjectAccess


class OwnProjectsFilter(admin.RelatedFieldListFilter):
    """The project filter of a list, offering only the projects the user may see."""

    def field_choices(self, field, request, model_admin):
        return [(p.pk, str(p)) for p in projects_for(request.user).order_by("name").only("id", "name")]


PROJECT_FILTER = ("project", OwnProjectsFilter)


class OwnerChoices:
    """Owner rows (ProjectAccess) offer only the users and groups the user may see (console/access/policy.py):
    the add form of an admin-role team member never lists another team's people."""

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user":
            kwargs["queryset"] = users_for(request.user).order_by("username")
        elif db_field.name == "group":
            kwargs["queryset"] = groups_for(request.user).order_by("name")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ProjectScopedAdmin(admin.ModelAdmin):
    """Rows of the user's projects only (`project_path` leads from the model to its project). Actions
    name the permissions they need: "run" (steer: start, pause, retry...) or "export"."""

    project_path = "project"

    def get_queryset(self, request):
        return scoped(super().get_queryset(request), request.user, self.project_path)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "project":
            kwargs["queryset"] = projects_for(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_run_permission(self, request) -> bool:
        return may(request.user, "run")

    def has_export_permission(self, request) -> bool:
        return may(request.user, "export")


class AllProjectsAdmin(admin.ModelAdmin):
    """Rows every project shares (hosts, robots.txt): only for users who see every project, as
    blocking a host steers the crawls of all of them."""

    def has_module_permission(self, request) -> bool:
        return sees_all(request.user) and super().has_module_permission(request)

    def has_view_permission(self, request, obj=None) -> bool:
        return sees_all(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(self, request, obj=None) -> bool:
        return sees_all(request.user) and super().has_change_permission(request, obj)

    def has_add_permission(self, request) -> bool:
        return sees_all(request.user) and super().has_add_permission(request)

    def has_delete_permission(self, request, obj=None) -> bool:
        return sees_all(request.user) and super().has_delete_permission(request, obj)


@admin.register(ProjectAccess)
class ProjectAccessAdmin(OwnerChoices, ProjectScopedAdmin):
    """Who owns which of the user's projects (also edited inline on each project)."""

    list_display = ("project", "user", "group")
    # Only the groups of the rows the user sees: a plain filter would list every team's name.
    list_filter = (PROJECT_FILTER, ("group", admin.RelatedOnlyFieldListFilter))
    search_fields = ("project__name", "user__username", "group__name")
    list_select_related = ("project", "user", "group")
