from django.urls import path

from cudaweb.fleet import views

app_name = "fleet"
urlpatterns = [
    path("", views.node_list, name="node_list"),
    path("nodes/add/", views.node_add, name="node_add"),
    path("nodes/<uuid:node_id>/", views.node_detail, name="node_detail"),
    path("nodes/<uuid:node_id>/host-key/fetch/", views.host_key_fetch, name="host_key_fetch"),
    path("nodes/<uuid:node_id>/host-key/accept/", views.host_key_accept, name="host_key_accept"),
    path("nodes/<uuid:node_id>/validate/", views.node_validate, name="node_validate"),
]
