"""The API's JSON parser (REST_FRAMEWORK's DEFAULT_PARSER_CLASSES): DRF's, except that JSON nested
past Python's recursion limit is a 400."""

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class JSONBodyParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
