"""A Content-Security-Policy on every console response that has none of its own: a script that
crawled content slips into a page (markup a template failed to escape) does not run, and a page
loads nothing from elsewhere. The console's pages use no inline script for this reason."""

CONSOLE_CSP = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",  # the admin's style attributes
        "img-src 'self' data:",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)


class ContentSecurityPolicyMiddleware:
    """Sets CONSOLE_CSP; a view's own policy (the sandbox of a stored body) is kept."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONSOLE_CSP)
        return response
