"""Last step of moving Node, SSHCredential and HostKey to the nodes app: the acceptance record points there, and
the old models leave the fleet app's state (their tables live on as nodes_*; nothing is dropped)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("fleet", "0003_node_tables_renamed"),
        ("nodes", "0001_initial"),
        ("validation", "0003_node_moved"),
    ]

    operations = [
        migrations.AlterField(
            model_name="acceptancerecord",
            name="node",
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="acceptance_records",
                                    to="nodes.node"),
        ),
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.DeleteModel(name="HostKey"),
            migrations.DeleteModel(name="Node"),
            migrations.DeleteModel(name="SSHCredential"),
        ], database_operations=[]),
    ]
