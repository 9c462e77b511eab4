"""Node, SSHCredential and HostKey move here from the fleet app (which became the pages' app).

The rows stay where they are: fleet 0003 renamed the tables to nodes_*, this migration only tells Django's state
that the models now belong to `nodes`; validation 0003 and fleet 0004 point the foreign keys here, and fleet 0004
drops the old models from the state. Content types follow, so permissions and admin history keep their objects.
"""

import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models

MOVED = ("node", "sshcredential", "hostkey")


def move_content_types(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in MOVED:
        if not ContentType.objects.filter(app_label="nodes", model=model).exists():
            ContentType.objects.filter(app_label="fleet", model=model).update(app_label="nodes")


def restore_content_types(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    ContentType.objects.filter(app_label="nodes", model__in=MOVED).update(app_label="fleet")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("fleet", "0003_node_tables_renamed"),
        ("validation", "0002_validationrun_changes_validationrun_drift_and_more"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
                migrations.CreateModel(
                    name='Node',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ('name', models.CharField(max_length=100, unique=True)),
                        ('address', models.CharField(blank=True, max_length=255)),
                        ('port', models.PositiveIntegerField(default=22)),
                        ('username', models.CharField(blank=True, max_length=64)),
                        ('transport', models.CharField(choices=[('ssh', 'SSH'), ('local', 'Local (this host)')], default='ssh', max_length=8)),
                        ('python_path', models.CharField(default='python3', help_text='interpreter on the node that runs the agent (the one with torch)', max_length=500)),
                        ('labels', models.JSONField(blank=True, default=list)),
                        ('agent_timeout_s', models.PositiveIntegerField(blank=True, help_text="overrides the mode's time budget for this node", null=True)),
                        ('status', models.CharField(choices=[('new', 'New'), ('ready', 'Ready'), ('passing', 'Passing'), ('warning', 'Warning'), ('failing', 'Failing'), ('unreachable', 'Unreachable'), ('quarantined', 'Quarantined')], default='new', max_length=12)),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('layer_status', models.JSONField(blank=True, default=dict, help_text='worst status per layer of the last report')),
                        ('gpu_model', models.CharField(blank=True, max_length=200)),
                        ('gpu_count', models.PositiveIntegerField(blank=True, null=True)),
                        ('metrics', models.JSONField(blank=True, default=dict, help_text='latest value of each headline metric')),
                        ('drifted', models.BooleanField(default=False)),
                        ('attention', models.CharField(blank=True, help_text='why the node needs a look (e.g. a failed scheduled run)', max_length=300)),
                        ('baseline', models.ForeignKey(blank=True, help_text='the run new runs are compared with', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='validation.validationrun')),
                        ('last_run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='validation.validationrun')),
                    ],
                    options={
                        'ordering': ['name'],
                    },
                ),
                migrations.CreateModel(
                    name='HostKey',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('key_type', models.CharField(max_length=64)),
                        ('key_base64', models.TextField()),
                        ('fingerprint_sha256', models.CharField(max_length=100)),
                        ('first_seen', models.DateTimeField(auto_now_add=True)),
                        ('accepted_at', models.DateTimeField(blank=True, null=True)),
                        ('accepted_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                        ('node', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='host_key', to='nodes.node')),
                    ],
                ),
                migrations.CreateModel(
                    name='SSHCredential',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, unique=True)),
                        ('private_key_encrypted', models.TextField(blank=True)),
                        ('key_path', models.CharField(blank=True, help_text='path to a key file on the worker host', max_length=500)),
                        ('created', models.DateTimeField(auto_now_add=True)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                    ],
                ),
                migrations.AddField(
                    model_name='node',
                    name='credential',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='nodes.sshcredential'),
                ),
                migrations.AddIndex(
                    model_name='node',
                    index=models.Index(fields=['status'], name='node_status_idx'),
                ),
                migrations.AddIndex(
                    model_name='node',
                    index=models.Index(fields=['gpu_model'], name='node_gpu_model_idx'),
                ),
        ], database_operations=[]),
        migrations.RunPython(move_content_types, restore_content_types),
    ]
