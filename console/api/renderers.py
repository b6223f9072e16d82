"""The browsable API, cut short: a page of large items (a hostile page's data) rendered whole
and highlighted in the browser would hang the tab. JSON clients get the whole response."""

from rest_framework.renderers import BrowsableAPIRenderer

MAX_SHOWN_CHARS = 200_000


class CappedBrowsableAPIRenderer(BrowsableAPIRenderer):
    def get_content(self, renderer, data, accepted_media_type, renderer_context):
        content = super().get_content(renderer, data, accepted_media_type, renderer_context)
        if len(content) <= MAX_SHOWN_CHARS:
            return content
        more = len(content) - MAX_SHOWN_CHARS
        return f"{content[:MAX_SHOWN_CHARS]}\n... {more} more characters: add ?format=json for the whole response"
