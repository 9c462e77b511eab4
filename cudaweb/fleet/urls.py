from django.urls import path

from cudaweb.fleet import views

app_name = "fleet"
urlpatterns = [
    path("", views.node_list, name="node_list"),
    path("nodes/validate/", views.nodes_validate, name="nodes_validate"),
    path("nodes/add/", views.node_add, name="node_add"),
    path("nodes/<uuid:node_id>/", views.node_detail, name="node_detail"),
    path("nodes/<uuid:node_id>/onboard/", views.node_onboard, name="node_onboard"),
    path("nodes/<uuid:node_id>/onboard/validate/", views.onboard_validate, name="onboard_validate"),
    path("nodes/<uuid:node_id>/onboard/decide/", views.onboard_decide, name="onboard_decide"),
    path("nodes/<uuid:node_id>/host-key/fetch/", views.host_key_fetch, name="host_key_fetch"),
    path("nodes/<uuid:node_id>/host-key/accept/", views.host_key_accept, name="host_key_accept"),
    path("nodes/<uuid:node_id>/validate/", views.node_validate, name="node_validate"),
    path("nodes/<uuid:node_id>/baseline/", views.node_baseline, name="node_baseline"),
    path("acceptance/<uuid:record_id>/", views.acceptance_detail, name="acceptance_detail"),
    path("acceptance/<uuid:record_id>.json", views.acceptance_json, name="acceptance_json"),
]
