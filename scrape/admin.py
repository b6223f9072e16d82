"""Admin for extracted items."""

from django.contrib import admin

from scrape.models import Item


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("id", "project", "page", "kind", "updated_at")
    list_filter = ("kind", "project")
    list_select_related = ("project", "page")
    raw_id_fields = ("page",)
    show_full_result_count = False
