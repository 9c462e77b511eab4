"""Every page of the dashboard, in URL namespaces: fleet (nodes, onboarding), runs, playbooks, network, audit.
Who may open each one: cudaweb/fleet/access.py."""

from django.urls import path

from cudaweb.fleet.views import audit, fleet, loop, network, nodes, onboarding, playbooks, runs, schedules
from cudaweb.fleet.views import events, policies

fleet_patterns = ([
    path("", fleet.node_list, name="node_list"),
    path("nodes/validate/", fleet.nodes_validate, name="nodes_validate"),
    path("nodes/add/", nodes.node_add, name="node_add"),
    path("nodes/<uuid:node_id>/edit/", nodes.node_edit, name="node_edit"),
    path("nodes/<uuid:node_id>/", nodes.node_detail, name="node_detail"),
    path("nodes/<uuid:node_id>/onboard/", onboarding.node_onboard, name="node_onboard"),
    path("nodes/<uuid:node_id>/onboard/validate/", onboarding.onboard_validate, name="onboard_validate"),
    path("nodes/<uuid:node_id>/onboard/decide/", onboarding.onboard_decide, name="onboard_decide"),
    path("nodes/<uuid:node_id>/host-key/fetch/", nodes.host_key_fetch, name="host_key_fetch"),
    path("nodes/<uuid:node_id>/host-key/accept/", nodes.host_key_accept, name="host_key_accept"),
    path("nodes/<uuid:node_id>/credential/", nodes.node_credential, name="node_credential"),
    path("nodes/<uuid:node_id>/validate/", nodes.node_validate, name="node_validate"),
    path("nodes/<uuid:node_id>/baseline/", nodes.node_baseline, name="node_baseline"),
    path("nodes/<uuid:node_id>/loop/", loop.node_loop_decide, name="node_loop_decide"),
    path("loop/breaker/close/", loop.breaker_close, name="breaker_close"),
    path("loop/bundles/<int:bundle_id>.zip", loop.rma_bundle, name="rma_bundle"),
    path("loop/policies/", policies.loop_policies, name="loop_policies"),
    path("loop/policies/<int:policy_id>/", policies.loop_policy_edit, name="loop_policy_edit"),
    path("loop/policies/<int:policy_id>/delete/", policies.loop_policy_delete, name="loop_policy_delete"),
    path("events/", events.event_list, name="events"),
    path("events/<int:event_id>/", events.event_detail, name="event_detail"),
    path("events/<int:event_id>/acknowledge/", events.event_acknowledge, name="event_acknowledge"),
    path("acceptance/<uuid:record_id>/", onboarding.acceptance_detail, name="acceptance_detail"),
    path("acceptance/<uuid:record_id>.json", onboarding.acceptance_json, name="acceptance_json"),
    path("acceptance/<uuid:record_id>/evidence.zip", onboarding.acceptance_bundle, name="acceptance_bundle"),
], "fleet")

run_patterns = ([
    path("batch/", runs.batch, name="batch"),
    path("compare/", runs.compare_pick, name="compare_pick"),
    path("schedules/", schedules.schedule_list, name="schedules"),
    path("schedules/<int:schedule_id>/delete/", schedules.schedule_delete, name="schedule_delete"),
    path("batch/fragment/", runs.batch_fragment, name="batch_fragment"),
    path("<uuid:run_a>/compare/<uuid:run_b>/", runs.compare, name="compare"),
    path("<uuid:run_id>/", runs.run_detail, name="run_detail"),
    path("<uuid:run_id>/fragment/", runs.run_fragment, name="run_fragment"),
    path("<uuid:run_id>/evidence/<str:check_id>.txt", runs.check_evidence, name="check_evidence"),
], "runs")

playbook_patterns = ([
    path("", playbooks.playbook_list, name="list"),
    path("triage/", playbooks.triage_log, name="triage"),
    path("<slug:playbook_id>/", playbooks.playbook_detail, name="detail"),
    path("vote/<uuid:run_id>/<slug:playbook_id>/", playbooks.vote, name="vote"),
], "playbooks")

network_patterns = ([
    path("", network.network_list, name="list"),
    path("start/", network.network_start, name="start"),
    path("<uuid:test_id>/", network.network_detail, name="detail"),
], "network")

audit_patterns = ([
    path("", audit.audit_list, name="list"),
    path("export.csv", audit.audit_export_csv, name="export_csv"),
    path("export.json", audit.audit_export_json, name="export_json"),
], "audit")
