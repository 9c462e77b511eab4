from django.db import models


class DriftThreshold(models.Model):
    """An operator's threshold for one metric, overriding the catalogue's default (percent worse = drift)."""

    metric = models.CharField(max_length=64, unique=True)
    threshold_pct = models.FloatField()

    def __str__(self):
        return "%s: %.1f%%" % (self.metric, self.threshold_pct)


class PeerBand(models.Model):
    """The spread of one metric over the latest runs of every node with one GPU model."""

    gpu_model = models.CharField(max_length=200)
    metric = models.CharField(max_length=64)
    median = models.FloatField()
    low = models.FloatField(help_text="10th percentile")
    high = models.FloatField(help_text="90th percentile")
    count = models.PositiveIntegerField()
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["gpu_model", "metric"], name="peer_band_unique")]

    def __str__(self):
        return "%s %s median %.3g (n=%d)" % (self.gpu_model, self.metric, self.median, self.count)
