from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate, post_save


def store_builtin_runners(sender, apps=None, **kwargs):
    try:
        if apps is not None:  # `migrate` says which models exist; a `flush` keeps them all
            apps.get_model("runners", "RunnerDescriptor")
    except LookupError:  # migrated back to before descriptors existed
        return
    from runners.plugins.registry import ensure_builtins_sync

    ensure_builtins_sync()


class RunnersConfig(AppConfig):
    name = "runners"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from runners.agent.builtins import BUILTIN_RUNNERS
        from runners.plugins import registry

        registry.register_builtins(BUILTIN_RUNNERS)
        # Built-in descriptors are written once per `migrate` (which `serve` runs at every start
        # and a test database's creation or flush repeats): looking a runner up only reads.
        post_migrate.connect(store_builtin_runners, sender=self)
        # The metrics count the ledger's signals from the process's first run on.
        # LLM runs read models through a short-lived cache; a change made here shows at once.
        from runners.models import LLMModel, ModelProvider
        from runners.observability import metrics  # noqa: F401
        from runners.providers.lookup import forget_models

        for model in (LLMModel, ModelProvider):
            for signal in (post_save, post_delete):
                signal.connect(lambda **kwargs: forget_models(), sender=model, weak=False,
                               dispatch_uid=f"forget-models-{model.__name__}-{id(signal)}")
