from django.views.decorators.http import require_safe

from cudaweb.api.views import api

patterns, app_name, namespace = api.urls
for pattern in patterns:
    if pattern.name == "openapi-json":  # ninja answers any method there; the document is for GET (and HEAD)
        pattern.callback = require_safe(pattern.callback)

api_urls = (patterns, app_name, namespace)
