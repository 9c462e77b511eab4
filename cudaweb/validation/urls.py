from django.urls import path

from cudaweb.validation import views

app_name = "validation"
urlpatterns = [
    path("<uuid:run_id>/", views.run_detail, name="run_detail"),
    path("<uuid:run_id>/fragment/", views.run_fragment, name="run_fragment"),
]
