"""Cursor pagination on the primary key: stable under inserts, and cheap at any depth."""

import re

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination

_ID = re.compile(r"[0-9]{1,19}")


class IdCursorPagination(CursorPagination):
    ordering = "-id"
    page_size_query_param = "page_size"
    max_page_size = 1000

    def decode_cursor(self, request):
        """DRF's decoding, plus: the position must be an id (a forged one would reach the query)."""
        cursor = super().decode_cursor(request)
        if cursor is not None and cursor.position is not None and not _ID.fullmatch(cursor.position):
            raise NotFound(self.invalid_cursor_message)
        return cursor
