"""First step of moving Node, SSHCredential and HostKey to the nodes app: their tables take the new app's names
(a rename keeps every row, index and constraint). See nodes 0001."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("fleet", "0002_acceptancerecord_node_attention_node_baseline_and_more"),
    ]

    operations = [
        migrations.AlterModelTable(name="sshcredential", table="nodes_sshcredential"),
        migrations.AlterModelTable(name="node", table="nodes_node"),
        migrations.AlterModelTable(name="hostkey", table="nodes_hostkey"),
    ]
