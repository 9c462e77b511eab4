"""A run's node is now nodes.Node (the same table, renamed by fleet 0003)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("nodes", "0001_initial"),
        ("validation", "0002_validationrun_changes_validationrun_drift_and_more"),
    ]

    operations = [
        migrations.AlterField(
            model_name="validationrun",
            name="node",
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="runs", to="nodes.node"),
        ),
    ]
