"""Admin for media assets."""

from django.contrib import admin

from media.models import MediaAsset


@admin.register(MediaAsset)
class MediaAssetAdmin(admin.ModelAdmin):
    list_display = ("url", "project", "kind", "state", "size", "mime", "error_code")
    list_filter = ("state", "kind", "project")
    search_fields = ("url", "sha256")
    list_select_related = ("project",)
    show_full_result_count = False
