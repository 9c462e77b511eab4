from django.urls import path

from cudaweb.playbooks import views

app_name = "playbooks"
urlpatterns = [
    path("", views.playbook_list, name="list"),
    path("triage/", views.triage_log, name="triage"),
    path("<slug:playbook_id>/", views.playbook_detail, name="detail"),
    path("vote/<uuid:run_id>/<slug:playbook_id>/", views.vote, name="vote"),
]
