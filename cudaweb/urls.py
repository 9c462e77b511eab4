from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from cudaweb.api.health import healthz
from cudaweb.api.metrics import metrics
from cudaweb.api.urls import api_urls
from cudaweb.fleet.urls import audit_patterns, fleet_patterns, network_patterns, playbook_patterns, run_patterns

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/v1/", api_urls),
    path("metrics", metrics, name="metrics"),
    path("healthz", healthz, name="healthz"),
    path("runs/", include(run_patterns)),
    path("playbooks/", include(playbook_patterns)),
    path("network/", include(network_patterns)),
    path("audit/", include(audit_patterns)),
    path("", include(fleet_patterns)),
]
