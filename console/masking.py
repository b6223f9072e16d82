"""The console's masking is the one rule of core/masking.py (every surface uses it: the API, the
admin, exports, Try a URL, alerts, sinks' errors, logs and commands)."""

from core.masking import (  # noqa: F401 - re-exported for the console's modules
    MASK,
    masked_config,
    masked_map,
    masked_request,
    masked_response_headers,
    masked_secrets,
    masked_set_cookie,
    masked_url,
    masked_webhook_url,
    unmasked_config,
    unmasked_map,
    unmasked_url,
)
