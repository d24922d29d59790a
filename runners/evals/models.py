from django.db import models


class EvalReport(models.Model):
    """One evaluation of an agent against an eval set (`runners.evals.services`): the report of
    every case and criterion, kept to compare with the next."""

    agent = models.ForeignKey("runners.AgentInstance", on_delete=models.CASCADE,
                              related_name="eval_reports")
    evalset_name = models.CharField(max_length=200)
    passed = models.PositiveIntegerField(help_text="Cases that passed every criterion.")
    failed = models.PositiveIntegerField()
    report_json = models.JSONField(help_text="Every case, turn and criterion, as printed.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.evalset_name} on {self.agent_id}: {self.passed}/{self.passed + self.failed}"
