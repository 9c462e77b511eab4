from django.urls import path

from cudaweb.validation import views

app_name = "validation"
urlpatterns = [
    path("batch/", views.batch, name="batch"),
    path("compare/", views.compare_pick, name="compare_pick"),
    path("schedules/", views.schedule_list, name="schedules"),
    path("schedules/<int:schedule_id>/delete/", views.schedule_delete, name="schedule_delete"),
    path("batch/fragment/", views.batch_fragment, name="batch_fragment"),
    path("<uuid:run_a>/compare/<uuid:run_b>/", views.compare, name="compare"),
    path("<uuid:run_id>/", views.run_detail, name="run_detail"),
    path("<uuid:run_id>/fragment/", views.run_fragment, name="run_fragment"),
]
