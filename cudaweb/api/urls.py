from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from cudaweb.api.views import api

patterns, app_name, namespace = api.urls
for pattern in patterns:
    if pattern.name == "openapi-json":  # ninja answers any method there; the document is for GET (and HEAD)
        # csrf_exempt: a POST is answered 405 by require_safe, not 403 by the CSRF check before it (it changes nothing)
        pattern.callback = csrf_exempt(require_safe(pattern.callback))

api_urls = (patterns, app_name, namespace)
