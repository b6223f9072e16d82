"""Admin for media assets: thumbnails, the stored object, retry of failed downloads."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from console.admin.access import PROJECT_FILTER, ProjectScopedAdmin
from console.admin.lists import CappedPaginator, recent_values_filter
from console.runs.control import assets_retry
from core.storage import object_url, open_object
from crawl.models import MediaAsset

# Crawled bytes are served from the admin's origin: only types a browser shows without running
# anything are sent inline, the rest as a download, all in a CSP sandbox.
INLINE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "video/", "audio/")


@admin.register(MediaAsset)
class MediaAssetAdmin(ProjectScopedAdmin):
    list_display = ("thumbnail", "url", "project", "kind", "state", "downloader", "size", "mime", "error_code")
    list_filter = ("state", "kind", recent_values_filter("downloader", "downloader"), PROJECT_FILTER)
    search_fields = ("url", "=sha256")
    list_select_related = ("project",)
    show_full_result_count = False
    paginator = CappedPaginator
    raw_id_fields = ("project",)
    readonly_fields = ("stored_object", *(f.name for f in MediaAsset._meta.fields))
    actions = ("retry_failed",)

    def has_add_permission(self, request):
        return False  # assets come from the pages that reference them

    @admin.action(description="Retry selected failed downloads", permissions=["run"])
    def retry_failed(self, request, queryset):
        count = assets_retry(assets=queryset)
        self.message_user(request, f"{count} failed assets queued again.", messages.SUCCESS)

    @admin.display(description="")
    def thumbnail(self, obj):
        if obj.kind != MediaAsset.Kind.IMAGE or not _stored(obj):
            return ""
        return format_html('<img src="{}" alt="" loading="lazy" style="max-height:60px;max-width:120px">', _url(obj))

    @admin.display(description="stored object")
    def stored_object(self, obj):
        if not _stored(obj):
            return "not stored"
        return format_html('<a href="{}">{}</a>', _url(obj), obj.storage_key)

    def get_urls(self):
        view = self.admin_site.admin_view(self.object_view)
        return [path("<int:asset_id>/object/", view, name="media_mediaasset_object"), *super().get_urls()]

    def object_view(self, request, asset_id: int):
        """The stored bytes: a redirect when the storage serves them itself (S3 presigned URL, an
        absolute MEDIA_URL), else streamed from the storage."""
        asset = get_object_or_404(self.get_queryset(request), id=asset_id)
        if not self.has_view_permission(request, asset):
            raise PermissionDenied
        if not _stored(asset):
            raise Http404("no stored object")
        url = object_url(asset.storage_key)
        if url.startswith(("http://", "https://")):
            return HttpResponseRedirect(url)
        return _object_response(asset)


def _stored(asset: MediaAsset) -> bool:
    return asset.state == MediaAsset.State.DONE and bool(asset.storage_key)


def _url(asset: MediaAsset) -> str:
    url = object_url(asset.storage_key)
    if url.startswith(("http://", "https://")):
        return url
    return reverse("admin:media_mediaasset_object", args=[asset.id])


def _object_response(asset: MediaAsset) -> FileResponse:
    try:
        handle = open_object(asset.storage_key)
    except FileNotFoundError:
        raise Http404("the stored object is missing") from None
    inline = asset.mime.startswith(INLINE_TYPES)
    response = FileResponse(
        handle,
        content_type=asset.mime if inline else "application/octet-stream",
        as_attachment=not inline,
        filename=asset.sha256,
    )
    response["Content-Security-Policy"] = "sandbox; default-src 'none'; img-src 'self'; media-src 'self'"
    response["X-Content-Type-Options"] = "nosniff"
    return response
