from django.contrib import admin

from cudaweb.accounts.audit import AuditedAdmin
from cudaweb.nodes.models import FabricExpectation, HostKey, Node, SSHCredential


@admin.register(Node)
class NodeAdmin(AuditedAdmin, admin.ModelAdmin):
    audit_name = "node"
    list_display = ("name", "address", "port", "transport", "status", "gpu_model", "drifted")
    list_filter = ("status", "gpu_model", "drifted")


@admin.register(SSHCredential)
class SSHCredentialAdmin(AuditedAdmin, admin.ModelAdmin):
    audit_name = "credential"
    list_display = ("name", "key_path", "created")
    exclude = ("private_key_encrypted",)


@admin.register(HostKey)
class HostKeyAdmin(AuditedAdmin, admin.ModelAdmin):
    audit_name = "host_key"
    list_display = ("node", "key_type", "fingerprint_sha256", "accepted_by", "accepted_at")


@admin.register(FabricExpectation)
class FabricExpectationAdmin(AuditedAdmin, admin.ModelAdmin):
    audit_name = "fabric_expectation"
    list_display = ("node", "label", "ib_rate_gbps")
